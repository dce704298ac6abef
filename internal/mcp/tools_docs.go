package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// docChunk is how much of a page get_doc returns at once; long pages are
// read in pieces so that one answer never floods the model's context.
const docChunk = 24000

// inputSchema infers a tool's input schema from In and lets the caller add
// what struct tags cannot say (enums, bounds, defaults).
func inputSchema[In any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	sch, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(In), err))
	}
	// Optional slices and pointers come out as ["null", T]. Absent and null
	// mean the same to these tools, and a single type is what clients that
	// map schemas onto narrower dialects (OpenAPI subsets) accept.
	for _, p := range sch.Properties {
		if len(p.Types) == 2 && slices.Contains(p.Types, "null") {
			p.Type = p.Types[0]
			if p.Type == "null" {
				p.Type = p.Types[1]
			}
			p.Types = nil
		}
	}
	if edit != nil {
		edit(sch.Properties)
	}
	return sch
}

func bounded(s *jsonschema.Schema, lo, hi float64, def any) {
	s.Minimum, s.Maximum = &lo, &hi
	if def != nil {
		s.Default = mustJSON(def)
	}
}

func enum(s *jsonschema.Schema, values ...string) {
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
}

type listDocsIn struct{}

type docInfo struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	Sections []string `json:"sections"`
	Chars    int      `json:"chars"`
}

type searchDocsIn struct {
	Query string `json:"query" jsonschema:"words to look for, e.g. 'JWT renewal' or 'ingestion errors'"`
	Limit int    `json:"limit,omitempty" jsonschema:"most sections to return (default 5, at most 20)"`
}

type getDocIn struct {
	Name   string `json:"name" jsonschema:"page name as list_docs or search_docs gives it, e.g. 'mcp'"`
	Offset int    `json:"offset,omitempty" jsonschema:"offset in characters (not bytes) to continue from: next_offset of the previous call"`
}

type getOCSFIn struct {
	Field string `json:"field,omitempty" jsonschema:"only fields whose path contains this text, e.g. 'cloud' or 'finding_info.uid'"`
}

func (s *Server) registerDocTools() {
	addTool(s, &mcpsdk.Tool{
		Name:        "list_docs",
		Title:       "List documentation pages",
		Description: "Lists the Posture documentation pages (name, title, section headings). Needs no API key.",
		InputSchema: inputSchema[listDocsIn](nil),
	}, false, func(_ context.Context, _ *caller, _ listDocsIn) (any, error) {
		out := make([]docInfo, 0, len(s.docs.docs))
		for _, d := range s.docs.docs {
			info := docInfo{Name: d.Name, Title: d.Title, Chars: utf8.RuneCountInString(d.Text), Sections: []string{}}
			for _, sec := range d.Sections {
				if sec.Level <= 3 {
					info.Sections = append(info.Sections, strings.Repeat("#", sec.Level)+" "+sec.Heading)
				}
			}
			out = append(out, info)
		}
		return map[string]any{"docs": out}, nil
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "search_docs",
		Title: "Search the documentation",
		Description: "Full-text search over the Posture documentation (installation, REST API, MCP setup, OCSF ingestion, operations). " +
			"Returns the best matching sections with a snippet; read a whole page with get_doc. Needs no API key.",
		InputSchema: inputSchema[searchDocsIn](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength = ptr(1)
			bounded(p["limit"], 1, 20, 5)
		}),
	}, false, func(_ context.Context, _ *caller, in searchDocsIn) (any, error) {
		if len(tokenize(in.Query)) == 0 {
			return nil, fmt.Errorf("query %q has no searchable words; use at least one word of two or more letters", in.Query)
		}
		limit := in.Limit
		if limit == 0 {
			limit = 5
		}
		hits := s.docs.search(in.Query, limit)
		out := map[string]any{"query": in.Query, "results": hits}
		if len(hits) == 0 {
			out["results"] = []docHit{}
			out["hint"] = "nothing matched; try other words, or list_docs to see every page: " + strings.Join(s.docs.names(), ", ")
		}
		return out, nil
	})

	addTool(s, &mcpsdk.Tool{
		Name:        "get_doc",
		Title:       "Read a documentation page",
		Description: fmt.Sprintf("Returns the Markdown of one documentation page, %d characters at a time (follow next_offset). Needs no API key.", docChunk),
		InputSchema: inputSchema[getDocIn](func(p map[string]*jsonschema.Schema) {
			p["name"].MinLength = ptr(1)
			p["offset"].Minimum = ptr(0.0)
		}),
	}, false, func(_ context.Context, _ *caller, in getDocIn) (any, error) {
		d, ok := s.docs.find(in.Name)
		if !ok {
			return nil, fmt.Errorf("no documentation page %q; the pages are: %s", in.Name, strings.Join(s.docs.names(), ", "))
		}
		text, chunk, next := docPage(d.Text, in.Offset)
		if text == nil {
			return nil, fmt.Errorf("offset %d is past the end of %s (%d characters)", in.Offset, d.Name, utf8.RuneCountInString(d.Text))
		}
		return map[string]any{"name": d.Name, "title": d.Title, "offset": in.Offset, "next_offset": next,
			"total_chars": len(text), "text": chunk}, nil
	})

	addTool(s, &mcpsdk.Tool{
		Name:  "get_ocsf_reference",
		Title: "OCSF Detection Finding field reference",
		Description: "Describes the fields of an OCSF Detection Finding record (class_uid 2004) that Posture ingests: type, meaning, " +
			"whether a record without it is rejected and with which error code, and which finding attribute it fills. Needs no API key.",
		InputSchema: inputSchema[getOCSFIn](nil),
	}, false, func(_ context.Context, _ *caller, in getOCSFIn) (any, error) {
		ref := lookupOCSF(in.Field)
		if len(ref.Fields) == 0 {
			return nil, fmt.Errorf("no OCSF field path contains %q; call without field for the whole reference", in.Field)
		}
		return ref, nil
	})
}

// docPage cuts the page text at offset, in characters (not bytes, so that
// an offset an agent computes never splits one), into a chunk of at most
// docChunk characters that ends at a line break when it can. text is the
// page as characters, nil when offset is past its end; next is the offset
// of the following chunk, nil after the last.
func docPage(page string, offset int) (text []rune, chunk string, next any) {
	text = []rune(page)
	if offset > len(text) {
		return nil, "", nil
	}
	end := len(text)
	if end-offset > docChunk {
		end = offset + docChunk
		// End at a line break so that Markdown is not cut mid-line.
		for i := end - 1; i > offset; i-- {
			if text[i] == '\n' {
				end = i + 1
				break
			}
		}
		next = end
	}
	return text, string(text[offset:end]), next
}
