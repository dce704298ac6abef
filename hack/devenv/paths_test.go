package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/testenv"
)

// generated are the paths a fresh clone lacks until a command the same
// instructions give first has written them.
var generated = map[string]string{
	".dev":              "written by make dev",
	"bin":               "built by make dev and make build",
	"test/node_modules": "installed by hack/test-deps.sh",
}

var (
	fence    = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	link     = regexp.MustCompile(`\]\(([^)#\s]+)`)
	// separators split a command into words that may be paths: curl's
	// file=@path, $(cat path), "quoted", list, path: and the like.
	separators = regexp.MustCompile(`[\s=@"'(),;:<>|]+`)
	url        = regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^\s"']*`)
)

// texts are the pieces of a Markdown file that name files: fenced code (with
// comments, which hold output, cut off), inline code, and link targets.
func texts(markdown string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(markdown, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			out = append(out, line)
		}
	}
	prose := fence.ReplaceAllString(markdown, "")
	for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
		out = append(out, m[1])
	}
	for _, m := range link.FindAllStringSubmatch(prose, -1) {
		if !strings.Contains(m[1], "://") {
			out = append(out, m[1])
		}
	}
	return out
}

// badPaths returns each path in texts that a fresh clone of the repository at
// root does not have, with the reason. A word is taken for a path when it
// contains a slash and starts at the repository (a top-level entry of it, or
// . or ..) or at the file system's root; other words with slashes (URLs,
// API routes, MIME types, Go packages) are not files of the repository.
func badPaths(root string, texts []string) []string {
	entries, _ := os.ReadDir(root)
	top := map[string]bool{".": true, "..": true}
	for _, e := range entries {
		top[e.Name()] = true
	}
	for g := range generated {
		top[strings.Split(g, "/")[0]] = true
	}
	var bad []string
	for _, text := range texts {
		for _, word := range separators.Split(url.ReplaceAllString(text, ""), -1) {
			word = strings.TrimRight(word, ".`*")
			if !strings.Contains(word, "/") || strings.Contains(word, "$") {
				continue
			}
			// make dev names the repository by its absolute path.
			if word == root || strings.HasPrefix(word, root+"/") {
				word = "." + strings.TrimPrefix(word, root)
			}
			if strings.HasPrefix(word, "/") {
				// A file outside the repository is not there in a fresh
				// clone; scratch output (-o /tmp/scan) is fine, and a
				// word whose first directory this machine lacks is an API
				// route (/api/v1/tokens), not a file.
				// Beside the repository is outside it wherever the clone
				// lives, /tmp included.
				first := "/" + strings.Split(word, "/")[1]
				dir := filepath.Dir(root)
				beside := dir != "/" && dir != "/tmp" && strings.HasPrefix(word, dir+"/")
				if beside || (first != "/tmp" && first != "/" && exists(first)) {
					bad = append(bad, word+": outside the repository")
				}
				continue
			}
			if !top[strings.Split(word, "/")[0]] {
				continue
			}
			clean := filepath.Clean(word)
			if clean == ".." || strings.HasPrefix(clean, "../") {
				bad = append(bad, word+": outside the repository")
				continue
			}
			if isGenerated(clean) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, clean)); err != nil {
				bad = append(bad, word+": not in the repository")
			}
		}
	}
	return bad
}

func isGenerated(path string) bool {
	for g := range generated {
		if path == g || strings.HasPrefix(path, g+"/") {
			return true
		}
	}
	return false
}

// Every file a newcomer is told to use is in the repository: README.md's
// commands, examples/README.md's, and the hint make dev prints all run in a
// fresh clone, where nothing beside the repository exists.
func TestInstructionsNameOnlyFilesOfTheRepository(t *testing.T) {
	root := testenv.Root()
	read := func(name string) []string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return texts(string(data))
	}
	for _, tc := range []struct {
		name  string
		texts []string
	}{
		{"README.md", read("README.md")},
		{"examples/README.md", read("examples/README.md")},
		{"make dev's hint", strings.Split(hint(root), "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range badPaths(root, tc.texts) {
				t.Errorf("%s names %s", tc.name, b)
			}
		})
	}
}

// The path finder itself: it must see the paths people are told to use and
// leave URLs, routes and types alone, or the test above proves nothing.
func TestBadPaths(t *testing.T) {
	root := testenv.Root()
	// A clone directly in /tmp has /tmp itself beside it, where scratch
	// output is allowed: there the sibling case cannot be told apart.
	besideWant := []string{filepath.Dir(root) + "/shared/scan.ocsf.json: outside the repository"}
	if dir := filepath.Dir(root); dir == "/" || dir == "/tmp" {
		besideWant = nil
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{`curl -F file=@../shared/fixtures/ocsf/prowler/aws_1500_records.ocsf.json "$POSTURE_API_URL/api/v1/ingestions"`,
			[]string{"../shared/fixtures/ocsf/prowler/aws_1500_records.ocsf.json: outside the repository"}},
		{`curl -F file=@examples/aws_1500_records.ocsf.json "$POSTURE_API_URL/api/v1/ingestions"`, nil},
		{`curl -F "file=@examples/nothing.ocsf.json;filename=r.ocsf.json"`, []string{"examples/nothing.ocsf.json: not in the repository"}},
		{`bin/postctl push --file ` + filepath.Dir(root) + `/shared/scan.ocsf.json`, besideWant},
		{`bin/postctl push --file /etc/posture/scan.ocsf.json`, []string{"/etc/posture/scan.ocsf.json: outside the repository"}},
		{`POST /api/v1/tokens`, nil},
		{"In another shell, in " + root + ":", nil},
		{`source ` + root + `/.dev/env; cat ` + root + `/nothing.txt`, []string{"./nothing.txt: not in the repository"}},
		{`kill -9 $(cat .dev/manager.pid); bin/postctl scan -o /tmp/scan`, nil},
		{`hack/test-deps.sh && test/node_modules/.bin/mcp-inspector`, nil},
		{`hack/no-such-script.sh`, []string{"hack/no-such-script.sh: not in the repository"}},
		{`see docs/operations.md.`, nil},
		{`-H "Content-Type: application/json" https://api.posture.dev/api/v1 k8s.io/api`, nil},
	} {
		if got := badPaths(root, []string{tc.text}); !slices.Equal(got, tc.want) {
			t.Errorf("badPaths(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
