package termsafe_test

import (
	"testing"

	"github.com/posture-dev/posture/internal/termsafe"
)

func TestString(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain text is kept", "aws-ec2-instance-public-ip", "aws-ec2-instance-public-ip"},
		{"letters of any script are kept", "résumé ✓ 日本 עברית", "résumé ✓ 日本 עברית"},
		{"a replacement character that was sent is kept", "a\uFFFDb", "a\uFFFDb"},
		{"OSC window title", "x\x1b]0;pwned\x07y", `x\x1b]0;pwned\x07y`},
		{"OSC 52 clipboard write", "\x1b]52;c;ZWNobyBoaQ==\x1b\\", `\x1b]52;c;ZWNobyBoaQ==\x1b\`},
		{"SGR colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"carriage return that would overwrite the line", "ok\rFAIL", `ok\x0dFAIL`},
		{"newline and tab that forge rows and columns", "a\nb\tc", `a\x0ab\x09c`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as a character", "a\u009b31mb", `a\u009b31mb`},
		{"C1 CSI as a lone byte", "a\x9b31mb", `a\x9b31mb`},
		{"right-to-left override", "invoice\u202Eexe.json", `invoice\u202eexe.json`},
		{"isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"marks", "\u200ea\u200fb\u061cc", `\u200ea\u200fb\u061cc`},
		{"embeddings and pop", "\u202aa\u202bb\u202c", `\u202aa\u202bb\u202c`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := termsafe.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if r, i := termsafe.Find(termsafe.String(tc.in)); i >= 0 {
				t.Errorf("String(%q) still holds %U at byte %d", tc.in, r, i)
			}
		})
	}
}

func TestFind(t *testing.T) {
	cases := []struct {
		in   string
		r    rune
		at   int
		name string
	}{
		{"report.ocsf.json", 0, -1, "safe"},
		{"re\x1bport", 0x1b, 2, "escape"},
		{"é\u202Ex", 0x202e, 2, "override after a two-byte letter"},
		{"ab\xffc", 0xfffd, 2, "a byte that is not UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, at := termsafe.Find(tc.in)
			if at != tc.at || (at >= 0 && r != tc.r) {
				t.Errorf("Find(%q) = %U at %d, want %U at %d", tc.in, r, at, tc.r, tc.at)
			}
		})
	}
}
