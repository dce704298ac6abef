// Package markdown renders the Markdown of OCSF findings (a finding's
// description, risk and remediation) to HTML safe to insert into a page.
//
// The text comes from whoever wrote the uploaded report, so it is
// untrusted: goldmark renders it without raw HTML, and bluemonday then
// keeps only an allow-list of formatting elements, with links that open
// only for http and https. Both steps are on purpose: goldmark alone
// still passes through what its renderer lets by (an autolink, an
// attribute), and the allow-list is the one place that decides what
// reaches the browser.
package markdown

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// md renders GitHub-flavoured Markdown (tables, strikethrough, bare URLs
// as links), which is what scanners write. Raw HTML is left out: goldmark
// replaces it with a comment unless told to be unsafe, which it is not.
var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// policy is the allow-list. No images (an image would fetch from
// wherever the report points, and the UI's CSP refuses them anyway), no
// styles, no classes, no ids, no event handlers: text formatting, lists,
// tables, code and links. A link keeps its href only for an absolute
// http or https URL; any other (javascript:, data:, vbscript:, relative)
// loses its href, and an <a> without one is dropped, its text kept.
var policy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
		"em", "strong", "del", "s", "code", "pre", "blockquote",
		"ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td")
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https")
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	// Links leave the page for a site the report named: a new tab, no
	// access back to this window, no referrer, and no endorsement.
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return p
}()

// HTML renders Markdown text to sanitized HTML. Empty text is empty HTML.
func HTML(text string) (string, error) {
	if text == "" {
		return "", nil
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(text), &buf); err != nil {
		return "", fmt.Errorf("render Markdown (%d bytes): %w", len(text), err)
	}
	return policy.Sanitize(buf.String()), nil
}

// SafeURL returns u when it is an absolute http or https URL with a
// host, the only links a page shows as links (a finding's references and
// related URLs), and "" otherwise: the same rule the policy applies to
// links in the Markdown.
func SafeURL(u string) string {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || p.Host == "" {
		return ""
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		return p.String()
	}
	return ""
}
