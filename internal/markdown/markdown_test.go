package markdown

import (
	"strings"
	"testing"
)

// TestHTML feeds the renderer what a hostile report would write and checks
// that what comes out is formatting and nothing that runs or loads.
func TestHTML(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []string // substrings the output must hold
		wantNot []string // substrings it must not (lower-cased output)
	}{
		{name: "heading and list", in: "## Why\n\n- one\n- **two**\n",
			want: []string{"<h2>Why</h2>", "<li>one</li>", "<strong>two</strong>"}},
		{name: "script tag", in: "before <script>alert(1)</script> after\n\n<script>window.pwned=1</script>",
			want: []string{"before", "after"}, wantNot: []string{"<script", "alert(1)</script", "window.pwned"}},
		{name: "img onerror", in: `<img src=x onerror="window.pwned=1">` + "\n\ntext",
			want: []string{"text"}, wantNot: []string{"<img", "onerror"}},
		{name: "markdown image", in: "![alt](https://tracker.example/pixel.png)",
			wantNot: []string{"<img", "tracker.example"}},
		{name: "javascript link", in: "[x](javascript:alert(1))",
			want: []string{"x"}, wantNot: []string{"<a", "javascript:"}},
		{name: "javascript link upper case", in: "[x](JaVaScRiPt:alert(1))",
			wantNot: []string{"<a", "javascript:"}},
		{name: "entity encoded javascript", in: "[x](&#106;avascript:alert(1))",
			wantNot: []string{"<a", "javascript:", "alert"}},
		{name: "data link", in: "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
			wantNot: []string{"<a", "data:"}},
		{name: "vbscript link", in: "[x](vbscript:msgbox)", wantNot: []string{"<a", "vbscript:"}},
		{name: "relative link", in: "[x](/api/v1/tokens)", wantNot: []string{"<a", "/api/v1/tokens"}},
		{name: "raw html anchor", in: `<a href="https://evil.example" onclick="x()">click</a>`,
			wantNot: []string{"onclick", "evil.example"}},
		{name: "raw html block", in: "<div style=\"position:fixed\"><iframe src=\"https://evil.example\"></iframe></div>\n\nok",
			want: []string{"ok"}, wantNot: []string{"<div", "<iframe", "style="}},
		{name: "attributes on allowed elements", in: `<p onmouseover="x()" class="c" id="i">p</p>`,
			wantNot: []string{"onmouseover", "class=", "id="}},
		{name: "svg", in: `<svg><script>alert(1)</script></svg>`, wantNot: []string{"<svg", "<script"}},
		{name: "http link", in: "[docs](https://docs.example/x?a=1&b=2)",
			want: []string{`<a href="https://docs.example/x?a=1&amp;b=2"`, `rel="nofollow noreferrer noopener"`, `target="_blank"`, ">docs</a>"}},
		{name: "bare url", in: "see https://docs.example/y", want: []string{`<a href="https://docs.example/y"`}},
		{name: "code keeps markup as text", in: "`<script>` and\n\n```\n<img onerror=x>\n```",
			want: []string{"<code>&lt;script&gt;</code>", "&lt;img onerror=x&gt;"}, wantNot: []string{"<script", "<img"}},
		{name: "table", in: "| a | b |\n|---|--:|\n| 1 | 2 |\n", want: []string{"<table>", "<th>a</th>", "<td>2</td>"}, wantNot: []string{"style="}},
		{name: "empty", in: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HTML(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q; want it to hold %q", tc.in, got, w)
				}
			}
			low := strings.ToLower(got)
			for _, w := range tc.wantNot {
				if strings.Contains(low, strings.ToLower(w)) {
					t.Errorf("HTML(%q) = %q; holds %q", tc.in, got, w)
				}
			}
			if tc.in == "" && got != "" {
				t.Errorf("HTML(\"\") = %q; want empty", got)
			}
		})
	}
}

func TestSafeURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://docs.example/a", "https://docs.example/a"},
		{"HTTP://docs.example/a", "http://docs.example/a"},
		{" https://docs.example/a ", "https://docs.example/a"},
		{"javascript:alert(1)", ""},
		{"JavaScript:alert(1)", ""},
		{"data:text/html,<script>alert(1)</script>", ""},
		{"/relative", ""},
		{"//docs.example/a", ""},
		{"https://", ""},
		{"ftp://docs.example/a", ""},
		{"", ""},
	} {
		if got := SafeURL(tc.in); got != tc.want {
			t.Errorf("SafeURL(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
