package mcp

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// docSet is the project's documentation, split into sections for search.
type docSet struct {
	docs []doc
}

type doc struct {
	Name     string // file name without .md, e.g. "mcp"
	Title    string
	Text     string
	Sections []docSection
}

type docSection struct {
	Heading string
	Level   int
	Body    string // the section's text including its heading line
}

// loadDocs reads every *.md at the root of fsys.
func loadDocs(fsys fs.FS) (*docSet, error) {
	ds := &docSet{}
	if fsys == nil {
		return ds, nil
	}
	names, err := fs.Glob(fsys, "*.md")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read doc %s: %w", name, err)
		}
		ds.docs = append(ds.docs, parseDoc(strings.TrimSuffix(path.Base(name), ".md"), string(b)))
	}
	return ds, nil
}

// parseDoc splits Markdown at its headings, ignoring # lines in code fences.
func parseDoc(name, text string) doc {
	d := doc{Name: name, Title: name, Text: text}
	var cur *docSection
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.Body = strings.TrimSpace(body.String())
			d.Sections = append(d.Sections, *cur)
		}
		body.Reset()
	}
	inFence := false
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(trimmed, "#") {
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			heading := strings.TrimSpace(trimmed[level:])
			if level <= 6 && heading != "" {
				flush()
				cur = &docSection{Heading: heading, Level: level}
				if level == 1 && d.Title == name {
					d.Title = heading
				}
			}
		}
		if cur == nil {
			cur = &docSection{Heading: name, Level: 1}
		}
		body.WriteString(line)
	}
	flush()
	return d
}

func (ds *docSet) find(name string) (doc, bool) {
	name = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(name), "docs/"), ".md")
	for _, d := range ds.docs {
		if strings.EqualFold(d.Name, name) {
			return d, true
		}
	}
	return doc{}, false
}

func (ds *docSet) names() []string {
	out := make([]string, 0, len(ds.docs))
	for _, d := range ds.docs {
		out = append(out, d.Name)
	}
	return out
}

type docHit struct {
	Doc     string  `json:"doc"`
	Title   string  `json:"title"`
	Heading string  `json:"heading"`
	Score   float64 `json:"score"`
	Snippet string  `json:"snippet"`
}

// definitionBonus is what a section that defines a query's word (a
// reference table's row or a list item naming it first) gains: a reader
// searching for a field or a flag wants where it is defined before the
// pages that only mention it, however often.
const definitionBonus = 10

// pastWeight scales the sections of pages that record the past (figures and
// designs of their day) rather than describe the product as it is.
var pastWeight = map[string]float64{"performance-history": 0.5}

// search ranks sections by how often and where the query's words occur:
// heading and title matches weigh more than body matches, every word found
// counts more than one word found many times, a section defining a word
// comes before those that mention it, and the exact phrase wins. Pages of
// history weigh less than the reference.
func (ds *docSet) search(query string, limit int) []docHit {
	terms := tokenize(query)
	if len(terms) == 0 {
		return nil
	}
	phrase := strings.ToLower(strings.Join(strings.Fields(query), " "))
	var hits []docHit
	for _, d := range ds.docs {
		title := strings.ToLower(d.Title)
		for _, s := range d.Sections {
			body := strings.ToLower(s.Body)
			heading := strings.ToLower(s.Heading)
			var score float64
			found := 0
			for _, t := range terms {
				n := strings.Count(body, t)
				if n == 0 && !strings.Contains(title, t) {
					continue
				}
				found++
				score += float64(min(n, 10))
				if strings.Contains(heading, t) {
					score += 5
				}
				if strings.Contains(title, t) {
					score += 2
				}
				if defines(body, t) {
					score += definitionBonus
				}
			}
			if found == 0 {
				continue
			}
			score *= float64(found) / float64(len(terms))
			if len(terms) > 1 && strings.Contains(body, phrase) {
				score += 10
			}
			if w, ok := pastWeight[d.Name]; ok {
				score *= w
			}
			hits = append(hits, docHit{Doc: d.Name, Title: d.Title, Heading: s.Heading, Score: float64(int(score*100)) / 100, Snippet: snippetAround(s.Body, terms, 320)})
		}
	}
	slices.SortStableFunc(hits, func(a, b docHit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// defines reports whether body (lower-cased) defines term: a table row
// whose first cell, or a list item whose first words, name it as code
// (`term`), as reference tables and option lists do.
func defines(body, term string) bool {
	code := "`" + term + "`"
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "|"):
			first, _, _ := strings.Cut(line[1:], "|")
			if strings.Contains(first, code) {
				return true
			}
		case strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "* "):
			if strings.HasPrefix(strings.TrimSpace(line[2:]), code) {
				return true
			}
		}
	}
	return false
}

func tokenize(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.' && r != '/'
	}) {
		f = strings.Trim(f, ".-/")
		if len(f) < 2 || stopWords[f] || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

var stopWords = map[string]bool{"the": true, "a": true, "an": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "is": true, "how": true, "do": true, "i": true, "for": true, "on": true, "with": true, "what": true, "it": true}

// snippetAround cuts about n bytes of text around the first term found.
func snippetAround(text string, terms []string, n int) string {
	lower := strings.ToLower(text)
	at := -1
	for _, t := range terms {
		if i := strings.Index(lower, t); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		at = 0
	}
	start := max(0, at-n/3)
	end := min(len(text), start+n)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end++
	}
	s := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}
