// Package mute decides which findings a mute rule matches: one compiled
// matcher that the MuteRule controller validates rules with and that the
// store marks findings with, so that a rule means the same everywhere.
package mute

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/store"
)

// FieldError says which field of a rule's match is wrong, by its path in
// the MuteRule (spec.match.checkId), and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Matcher is a compiled MuteMatch.
type Matcher struct {
	m     store.MuteMatch
	globs [5]*regexp.Regexp // checkId, account, region, resourceUid, resourceName
}

// textFields are the glob fields, in Matcher.globs' order.
var textFields = []string{"checkId", "account", "region", "resourceUid", "resourceName"}

// Compile checks m and compiles its globs. A match with no field, a glob
// that does not parse or a severity OCSF does not know is a *FieldError.
func Compile(m store.MuteMatch) (*Matcher, error) {
	c := &Matcher{m: m}
	texts := []string{m.CheckID, m.Account, m.Region, m.ResourceUID, m.ResourceName}
	any := len(m.Severity) > 0 || len(m.StatusCode) > 0
	for i, t := range texts {
		if t == "" {
			continue
		}
		any = true
		re, err := Glob(t)
		if err != nil {
			return nil, &FieldError{Field: "spec.match." + textFields[i], Reason: err.Error()}
		}
		c.globs[i] = re
	}
	if !any {
		return nil, &FieldError{Field: "spec.match", Reason: "matches nothing: give at least one of checkId, account, region, resourceUid, resourceName, severity, statusCode"}
	}
	for i, s := range m.Severity {
		if !findings.ValidSeverity(strings.TrimSpace(s)) {
			return nil, &FieldError{Field: fmt.Sprintf("spec.match.severity[%d]", i),
				Reason: fmt.Sprintf("unknown severity %q: want one of %s", s, strings.Join(findings.Severities, ", "))}
		}
	}
	for i, s := range m.StatusCode {
		if strings.TrimSpace(s) == "" {
			return nil, &FieldError{Field: fmt.Sprintf("spec.match.statusCode[%d]", i), Reason: "empty status code"}
		}
	}
	return c, nil
}

// Glob compiles a glob: `*` any run of characters (`/` and `:` too),
// `?` one character, `[...]` one of a set (`[!...]` or `[^...]` one not in
// it); `\` takes the next character as it is. Anything else matches
// itself, and the whole text must match.
func Glob(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	for i := 0; i < len(g); i++ {
		switch ch := g[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 == len(g) {
				return nil, fmt.Errorf("glob %q ends with an escaping backslash", g)
			}
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end == 0 {
				// "[]...]": a leading ] belongs to the set.
				if e := strings.IndexByte(g[i+2:], ']'); e >= 0 {
					end = e + 1
				} else {
					end = -1
				}
			}
			if end < 0 {
				return nil, fmt.Errorf("glob %q has a [ at offset %d without its closing ]", g, i)
			}
			set := g[i+1 : i+1+end]
			if strings.HasPrefix(set, "!") {
				set = "^" + set[1:]
			}
			if set == "" || set == "^" {
				return nil, fmt.Errorf("glob %q has an empty set at offset %d", g, i)
			}
			b.WriteString("[" + strings.ReplaceAll(set, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString(`)\z`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("glob %q: %v", g, err)
	}
	return re, nil
}

// Match reports whether the finding f matches every field of the rule.
func (c *Matcher) Match(f *store.Finding) bool {
	if len(c.m.Severity) > 0 && !slices.ContainsFunc(c.m.Severity, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), f.Severity) }) {
		return false
	}
	if len(c.m.StatusCode) > 0 && !slices.ContainsFunc(c.m.StatusCode, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), f.StatusCode) }) {
		return false
	}
	for i, v := range []string{f.CheckID, f.ProviderUID, f.Region, f.ResourceUID} {
		if re := c.globs[i]; re != nil && !re.MatchString(v) {
			return false
		}
	}
	if re := c.globs[4]; re != nil {
		return slices.ContainsFunc(resourceNames(f.Raw), re.MatchString)
	}
	return true
}

// resourceNames reads the names of a record's resources (OCSF
// resources[].name); any of them may match.
func resourceNames(raw []byte) []string {
	var rec struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if json.Unmarshal(raw, &rec) != nil {
		return nil
	}
	names := make([]string, 0, len(rec.Resources))
	for _, r := range rec.Resources {
		if r.Name != "" {
			names = append(names, r.Name)
		}
	}
	return names
}

// Rules are a tenant's compiled rules, for marking findings.
type Rules []CompiledRule

// CompiledRule is a stored rule with its matcher.
type CompiledRule struct {
	store.MuteRule
	Matcher *Matcher
}

// CompileRules compiles the rules that compile; a stored rule that does
// not (its controller refuses it before storing, so only by a bug) is left
// out rather than failing every ingestion of the tenant.
func CompileRules(rules []store.MuteRule) Rules {
	out := make(Rules, 0, len(rules))
	for _, r := range rules {
		if m, err := Compile(r.Match); err == nil {
			out = append(out, CompiledRule{MuteRule: r, Matcher: m})
		}
	}
	return out
}

// MatchOf is a MuteRule's match as the store and the matcher take it.
func MatchOf(m posturev1.MuteMatch) store.MuteMatch {
	return store.MuteMatch{CheckID: m.CheckID, Account: m.Account, Region: m.Region, ResourceUID: m.ResourceUID,
		ResourceName: m.ResourceName, Severity: m.Severity, StatusCode: m.StatusCode}
}

// Stored is a MuteRule as the store keeps it.
func Stored(rule *posturev1.MuteRule) store.MuteRule {
	out := store.MuteRule{Name: rule.Name, Generation: rule.Generation, Reason: rule.Spec.Reason, Match: MatchOf(rule.Spec.Match)}
	if rule.Spec.ExpiresAt != nil {
		t := rule.Spec.ExpiresAt.Time
		out.ExpiresAt = &t
	}
	return out
}
