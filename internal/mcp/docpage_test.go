package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// get_doc's offsets count characters: following next_offset gives the page
// back whole, and an offset of any character starts the text there, never
// inside a multi-byte one.
func TestDocPageCountsCharacters(t *testing.T) {
	line := "Schritt für Schritt — “Posture” ✓\n"
	page := strings.Repeat(line, 3*docChunk/utf8.RuneCountInString(line))
	var got strings.Builder
	offset, chunks := 0, 0
	for {
		text, chunk, next := docPage(page, offset)
		if text == nil || !utf8.ValidString(chunk) || utf8.RuneCountInString(chunk) > docChunk {
			t.Fatalf("offset %d: a chunk of %d characters, valid UTF-8 %v", offset, utf8.RuneCountInString(chunk), utf8.ValidString(chunk))
		}
		if len(text) != utf8.RuneCountInString(page) {
			t.Fatalf("total %d characters, want %d", len(text), utf8.RuneCountInString(page))
		}
		got.WriteString(chunk)
		chunks++
		if next == nil {
			break
		}
		if !strings.HasSuffix(chunk, "\n") {
			t.Errorf("chunk %d does not end at a line break", chunks)
		}
		offset = next.(int)
	}
	if got.String() != page || chunks < 3 {
		t.Errorf("%d chunks gave %d characters back, want the page's %d", chunks, utf8.RuneCountInString(got.String()), utf8.RuneCountInString(page))
	}
	// Any character offset starts at that character.
	runes := []rune(page)
	for _, off := range []int{1, 7, 11, len(runes) - 1} {
		if _, chunk, _ := docPage(page, off); !strings.HasPrefix(chunk, string(runes[off:off+1])) || !utf8.ValidString(chunk) {
			t.Errorf("offset %d starts with %q, want %q", off, []rune(chunk)[:1], runes[off:off+1])
		}
	}
	if text, _, _ := docPage(page, len(runes)+1); text != nil {
		t.Error("an offset past the end gave text")
	}
}
