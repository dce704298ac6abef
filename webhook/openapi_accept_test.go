package webhook

import "testing"

// The schema's rendering follows the Accept header's qualities: a type with
// q=0 is refused, and YAML is chosen only when preferred to every JSON type.
func TestSchemaFormat(t *testing.T) {
	for _, tc := range []struct {
		accept   string
		yaml, ok bool
	}{
		{"", false, true},
		{"*/*", false, true},
		{"application/json", false, true},
		{"application/vnd.oai.openapi+json", false, true},
		{"application/yaml", true, true},
		{"text/yaml", true, true},
		{"application/yaml;q=0", false, false},
		{"application/yaml;q=0, */*", false, true},
		{"application/json;q=0.5, application/yaml", true, true},
		{"application/json, application/yaml;q=0.5", false, true},
		{"application/json;q=0, application/yaml;q=0.1", true, true},
		{"application/json, application/yaml", false, true},
		{"text/*", true, true},
		{"text/html", false, false},
		{"*/*;q=0", false, false},
	} {
		yaml, ok := schemaFormat(tc.accept)
		if yaml != tc.yaml || ok != tc.ok {
			t.Errorf("schemaFormat(%q) = yaml %v, ok %v; want yaml %v, ok %v", tc.accept, yaml, ok, tc.yaml, tc.ok)
		}
	}
}
