package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("..", "..", "charts", "posture")

// object is one rendered manifest.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := dig(o, "metadata", "name").(string); return s }

// dig walks maps by key and slices by int index; nil when a step is missing.
func dig(v any, path ...any) any {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// rendered is the chart rendered with one value set.
type rendered struct {
	objs  []object
	notes string
}

func (r rendered) all(kind string) []object {
	var out []object
	for _, o := range r.objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) one(t *testing.T, kind, name string) object {
	t.Helper()
	for _, o := range r.all(kind) {
		if o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func (r rendered) manager(t *testing.T) (deployment, container object) {
	t.Helper()
	deps := r.all("Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(deps))
	}
	c, _ := dig(deps[0], "spec", "template", "spec", "containers", 0).(map[string]any)
	return deps[0], c
}

func renderSet(t *testing.T, sets ...string) rendered {
	t.Helper()
	out, err := render(chartDir, "posture", "posture-system", sets, false)
	if err != nil {
		t.Fatalf("render with %v: %v", sets, err)
	}
	var r rendered
	for name, body := range out {
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = body
			continue
		}
		for _, doc := range strings.Split(body, "\n---") {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(o) > 0 {
				r.objs = append(r.objs, o)
			}
		}
	}
	return r
}

func names(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.name())
	}
	slices.Sort(out)
	return out
}

// TestRender asserts the objects each value set renders.
func TestRender(t *testing.T) {
	crdNames := []string{"apikeys.posture.dev", "ingestions.posture.dev", "mcpservers.posture.dev", "muterules.posture.dev", "providers.posture.dev", "tenants.posture.dev"}
	sqlite := []string{"store.driver=sqlite", "executor=inprocess", "replicaCount=1"}
	for _, tc := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, r rendered)
	}{
		{"CRDs are templates, kept on uninstall", nil, func(t *testing.T, r rendered) {
			crds := r.all("CustomResourceDefinition")
			if got := names(crds); !slices.Equal(got, crdNames) {
				t.Fatalf("CRDs %v, want %v", got, crdNames)
			}
			for _, c := range crds {
				if dig(c, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
					t.Errorf("CRD %s lacks helm.sh/resource-policy: keep", c.name())
				}
				if dig(c, "metadata", "labels", "app.kubernetes.io/instance") != "posture" {
					t.Errorf("CRD %s lacks the release labels: %v", c.name(), dig(c, "metadata", "labels"))
				}
				// fromYaml/toYaml must carry the generated CRD over unchanged.
				raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", fmt.Sprintf("%s_%s.yaml", dig(c, "spec", "group"), dig(c, "spec", "names", "plural"))))
				if err != nil {
					t.Fatalf("CRD %s: %v", c.name(), err)
				}
				var src object
				if err := yaml.Unmarshal(raw, &src); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(src["spec"], c["spec"]) {
					t.Errorf("CRD %s: the rendered spec differs from config/crd/bases", c.name())
				}
			}
		}},
		{"crds.keep=false", []string{"crds.keep=false"}, func(t *testing.T, r rendered) {
			for _, c := range r.all("CustomResourceDefinition") {
				if v := dig(c, "metadata", "annotations", "helm.sh/resource-policy"); v != nil {
					t.Errorf("CRD %s has resource-policy %v with crds.keep=false", c.name(), v)
				}
			}
		}},
		{"crds.enabled=false", []string{"crds.enabled=false"}, func(t *testing.T, r rendered) {
			if crds := r.all("CustomResourceDefinition"); len(crds) != 0 {
				t.Errorf("CRDs rendered with crds.enabled=false: %v", names(crds))
			}
		}},
		{"defaults: PDB for two replicas, no Ingress, no PVC", nil, func(t *testing.T, r rendered) {
			pdb := r.one(t, "PodDisruptionBudget", "posture")
			if dig(pdb, "spec", "minAvailable") != float64(1) {
				t.Errorf("PDB spec %v, want minAvailable 1", pdb["spec"])
			}
			for _, kind := range []string{"Ingress", "HTTPRoute", "PersistentVolumeClaim"} {
				if len(r.all(kind)) != 0 {
					t.Errorf("%s rendered by default", kind)
				}
			}
			dep, _ := r.manager(t)
			if s := dig(dep, "spec", "strategy"); s != nil {
				t.Errorf("PostgreSQL mode has strategy %v, want the default rolling update", s)
			}
		}},
		{"one replica: no PDB unless asked", []string{"replicaCount=1"}, func(t *testing.T, r rendered) {
			if pdbs := r.all("PodDisruptionBudget"); len(pdbs) != 0 {
				t.Errorf("PDB rendered for one replica: %v", names(pdbs))
			}
		}},
		{"podDisruptionBudget.maxUnavailable", []string{"replicaCount=1", "podDisruptionBudget.enabled=true", "podDisruptionBudget.maxUnavailable=1"}, func(t *testing.T, r rendered) {
			pdb := r.one(t, "PodDisruptionBudget", "posture")
			if dig(pdb, "spec", "maxUnavailable") != float64(1) || dig(pdb, "spec", "minAvailable") != nil {
				t.Errorf("PDB spec %v, want maxUnavailable 1 alone", pdb["spec"])
			}
		}},
		{"SQLite on a PVC: Recreate", append(slices.Clone(sqlite), "persistence.enabled=true", "persistence.size=20Gi", "persistence.storageClass=fast"), func(t *testing.T, r rendered) {
			pvc := r.one(t, "PersistentVolumeClaim", "posture-data")
			if dig(pvc, "spec", "resources", "requests", "storage") != "20Gi" || dig(pvc, "spec", "storageClassName") != "fast" ||
				dig(pvc, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
				t.Errorf("PVC %v", pvc)
			}
			dep, c := r.manager(t)
			if dig(dep, "spec", "strategy", "type") != "Recreate" {
				t.Errorf("strategy %v, want Recreate", dig(dep, "spec", "strategy"))
			}
			if v := volume(dep, "data"); dig(v, "persistentVolumeClaim", "claimName") != "posture-data" {
				t.Errorf("data volume %v, want the claim posture-data", v)
			}
			if env(c, "POSTURE_STORE_DSN") != "/var/lib/posture/posture.db" || !mounted(c, "data", "/var/lib/posture") {
				t.Errorf("the manager does not keep its SQLite file on the data volume: env %v mounts %v", c["env"], c["volumeMounts"])
			}
			if strings.Contains(r.notes, "EPHEMERAL") {
				t.Errorf("NOTES warn of an ephemeral store with persistence on:\n%s", r.notes)
			}
			// A new volume's root directory belongs to root (0755) on most
			// provisioners: without fsGroup the kubelet leaves it so, and the
			// manager, user 65532, cannot create its database file there.
			if g := dig(dep, "spec", "template", "spec", "securityContext", "fsGroup"); g != float64(65532) {
				t.Errorf("pod securityContext fsGroup = %v, want 65532 so the manager may write the claim's root directory", g)
			}
		}},
		// With the kube-apiserver pinned (the production checklist), declared
		// URL sources go out on 443 only where reportSources allows.
		{"NetworkPolicy: report sources allowed", []string{"networkPolicy.enabled=true", "networkPolicy.kubeAPIServer.to[0].ipBlock.cidr=10.0.0.1/32",
			"networkPolicy.reportSources.to[0].ipBlock.cidr=10.20.0.0/16"}, func(t *testing.T, r rendered) {
			found := false
			for _, rule := range egressOn(r.one(t, "NetworkPolicy", "posture-manager"), 443) {
				found = found || dig(rule, "to", 0, "ipBlock", "cidr") == "10.20.0.0/16"
			}
			if !found {
				t.Errorf("no egress rule on 443 to 10.20.0.0/16: %v", dig(r.one(t, "NetworkPolicy", "posture-manager"), "spec", "egress"))
			}
		}},
		{"SQLite on an existing claim", append(slices.Clone(sqlite), "persistence.enabled=true", "persistence.existingClaim=mine"), func(t *testing.T, r rendered) {
			if pvcs := r.all("PersistentVolumeClaim"); len(pvcs) != 0 {
				t.Errorf("PVC rendered besides the existing claim: %v", names(pvcs))
			}
			dep, _ := r.manager(t)
			if v := volume(dep, "data"); dig(v, "persistentVolumeClaim", "claimName") != "mine" {
				t.Errorf("data volume %v, want the claim mine", v)
			}
		}},
		{"SQLite ephemeral: loud NOTES", sqlite, func(t *testing.T, r rendered) {
			dep, _ := r.manager(t)
			if v := volume(dep, "data"); v == nil || v["emptyDir"] == nil {
				t.Errorf("data volume %v, want an emptyDir", v)
			}
			if !strings.Contains(r.notes, "WARNING: the SQLite database is EPHEMERAL") {
				t.Errorf("NOTES do not warn that the store is ephemeral:\n%s", r.notes)
			}
		}},
		{"Ingress with cert-manager", []string{"ingress.enabled=true", "ingress.className=nginx", "ingress.hosts={posture.example.com}",
			"ingress.certManager.clusterIssuer=letsencrypt", "api.tls.enabled=true"}, func(t *testing.T, r rendered) {
			ing := r.one(t, "Ingress", "posture-api")
			if dig(ing, "metadata", "annotations", "cert-manager.io/cluster-issuer") != "letsencrypt" {
				t.Errorf("annotations %v lack cert-manager.io/cluster-issuer", dig(ing, "metadata", "annotations"))
			}
			if dig(ing, "spec", "tls", 0, "secretName") != "posture-ingress-tls" || dig(ing, "spec", "tls", 0, "hosts", 0) != "posture.example.com" {
				t.Errorf("tls %v", dig(ing, "spec", "tls"))
			}
			backend := dig(ing, "spec", "rules", 0, "http", "paths", 0, "backend", "service")
			if dig(backend, "name") != "posture-api" || dig(backend, "port", "name") != "https" {
				t.Errorf("backend %v, want the API Service's https port", backend)
			}
		}},
		{"HTTPRoute", []string{"httpRoute.enabled=true", "httpRoute.parentRefs[0].name=public", "httpRoute.hostnames={posture.example.com}"}, func(t *testing.T, r rendered) {
			rt := r.one(t, "HTTPRoute", "posture-api")
			if dig(rt, "spec", "parentRefs", 0, "name") != "public" || dig(rt, "spec", "rules", 0, "backendRefs", 0, "name") != "posture-api" ||
				dig(rt, "spec", "rules", 0, "backendRefs", 0, "port") != float64(80) {
				t.Errorf("HTTPRoute spec %v", rt["spec"])
			}
		}},
		{"extraEnv, extraVolumes, extraVolumeMounts", []string{"extraEnv[0].name=PGSSLROOTCERT", "extraEnv[0].value=/etc/db-ca/ca.crt",
			"extraVolumes[0].name=db-ca", "extraVolumes[0].configMap.name=db-ca", "extraVolumeMounts[0].name=db-ca", "extraVolumeMounts[0].mountPath=/etc/db-ca"}, func(t *testing.T, r rendered) {
			dep, c := r.manager(t)
			if env(c, "PGSSLROOTCERT") != "/etc/db-ca/ca.crt" || env(c, "POD_NAMESPACE") == nil {
				t.Errorf("env %v: want PGSSLROOTCERT beside the chart's own", c["env"])
			}
			if v := volume(dep, "db-ca"); dig(v, "configMap", "name") != "db-ca" || volume(dep, "tmp") == nil {
				t.Errorf("volumes %v", dig(dep, "spec", "template", "spec", "volumes"))
			}
			if !mounted(c, "db-ca", "/etc/db-ca") {
				t.Errorf("mounts %v", c["volumeMounts"])
			}
		}},
		{"an existing ServiceAccount", []string{"serviceAccount.create=false", "serviceAccount.name=platform-posture"}, func(t *testing.T, r rendered) {
			if sas := r.all("ServiceAccount"); len(sas) != 0 {
				t.Errorf("ServiceAccount rendered with create=false: %v", names(sas))
			}
			dep, c := r.manager(t)
			if dig(dep, "spec", "template", "spec", "serviceAccountName") != "platform-posture" || !slices.Contains(args(c), "--service-account=platform-posture") {
				t.Errorf("the manager does not run as platform-posture")
			}
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, b := range r.all(kind) {
					if dig(b, "subjects", 0, "name") != "platform-posture" {
						t.Errorf("%s %s binds %v", kind, b.name(), b["subjects"])
					}
				}
			}
		}},
		{"ServiceAccount annotations", []string{"serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=p@x.iam"}, func(t *testing.T, r rendered) {
			sa := r.one(t, "ServiceAccount", "posture")
			if dig(sa, "metadata", "annotations", "iam.gke.io/gcp-service-account") != "p@x.iam" {
				t.Errorf("annotations %v", dig(sa, "metadata", "annotations"))
			}
		}},
		{"rbac.create=false", []string{"rbac.create=false"}, func(t *testing.T, r rendered) {
			for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				// The admission policies' posture-apikey-issuer role is not the manager's RBAC.
				for _, o := range r.all(kind) {
					if o.name() != "posture-apikey-issuer" {
						t.Errorf("%s %s rendered with rbac.create=false", kind, o.name())
					}
				}
			}
		}},
		{"view and edit aggregation", nil, func(t *testing.T, r rendered) {
			view, edit := r.one(t, "ClusterRole", "posture-view"), r.one(t, "ClusterRole", "posture-edit")
			if dig(view, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-view") != "true" ||
				dig(edit, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-edit") != "true" {
				t.Errorf("labels view %v edit %v", dig(view, "metadata", "labels"), dig(edit, "metadata", "labels"))
			}
			if dig(edit, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-view") != nil {
				t.Errorf("the edit rules reach the view role")
			}
			res := dig(view, "rules", 0, "resources")
			for _, want := range []string{"tenants", "apikeys", "ingestions", "providers", "mcpservers", "muterules"} {
				if !slices.Contains(res.([]any), any(want)) {
					t.Errorf("view lacks %s: %v", want, res)
				}
			}
			for _, rule := range dig(edit, "rules").([]any) {
				if slices.Contains(dig(rule, "resources").([]any), any("apikeys")) || slices.Contains(dig(rule, "resources").([]any), any("tenants")) {
					t.Errorf("edit writes API keys or tenants: %v", rule)
				}
			}
		}},
		{"no aggregation", []string{"rbac.aggregateToDefaultRoles=false"}, func(t *testing.T, r rendered) {
			for _, o := range r.all("ClusterRole") {
				if o.name() == "posture-view" || o.name() == "posture-edit" {
					t.Errorf("%s rendered with aggregateToDefaultRoles=false", o.name())
				}
			}
		}},
		{"fullnameOverride and commonLabels reach every object", []string{"fullnameOverride=sec", "commonLabels.team=platform",
			"store.driver=sqlite", "executor=inprocess", "replicaCount=1", "persistence.enabled=true", "podDisruptionBudget.enabled=true",
			"ingress.enabled=true", "ingress.hosts={p.example.com}", "httpRoute.enabled=true", "httpRoute.parentRefs[0].name=gw"}, func(t *testing.T, r rendered) {
			for _, o := range r.objs {
				if dig(o, "metadata", "labels", "team") != "platform" {
					t.Errorf("%s %s lacks commonLabels", o.kind(), o.name())
				}
				// Cluster-wide fixed names: CRDs, the APIService and the admission policies' objects.
				if o.kind() != "CustomResourceDefinition" && o.kind() != "APIService" && !strings.HasPrefix(o.name(), "posture-apikey-") && !strings.HasPrefix(o.name(), "posture-mcpserver-") && !strings.HasPrefix(o.name(), "posture-ingestion-") &&
					!strings.HasPrefix(o.name(), "sec") {
					t.Errorf("%s %s is not named after fullnameOverride", o.kind(), o.name())
				}
			}
			_, c := r.manager(t)
			if !slices.Contains(args(c), "--tenant-access-role=sec-tenant-access") {
				t.Errorf("args %v", args(c))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, renderSet(t, tc.sets...)) })
	}
}

// TestSchemaRejects: values.schema.json turns typos and wrong types into
// errors of helm install, lint and template.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"executor=jobs", "at '/executor': value must be one of 'job', 'inprocess'"},
		{"replicaCount=two", "at '/replicaCount': got string, want integer"},
		{"replicaCount=0", "at '/replicaCount': minimum"},
		{"serviceMonitorr.enabled=true", "additional properties 'serviceMonitorr' not allowed"},
		{"store.driver=mysql", "at '/store/driver': value must be one of"},
		{"store.reportRetention=forever", "at '/store/reportRetention'"},
		{"ingress.enabled=yes", "at '/ingress/enabled': got string, want boolean"},
		{"ingress.host=x", "additional properties 'host' not allowed"},
		{"api.service.port=70000", "at '/api/service/port': maximum"},
		{"image.pullPolicy=Sometimes", "at '/image/pullPolicy'"},
		{"crds.enable=false", "additional properties 'enable' not allowed"},
		{"extraArgs={poll-interval=2s}", "at '/extraArgs/0'"},
		{"persistence.size=lots", "at '/persistence/size'"},
		{"aggregatedAPI.port=0", "at '/aggregatedAPI/port': minimum"},
		{"aggregatedAPI.certManager.issuer=ca", "additional properties 'issuer' not allowed"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := render(chartDir, "posture", "posture-system", []string{tc.set}, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("--set %s: error %v, want one containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestTemplateRefusals: combinations the schema cannot express fail with a
// message naming the values.
func TestTemplateRefusals(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"store.driver=sqlite", "replicaCount=1"}, "executor=job needs store.driver=postgres"},
		{[]string{"store.driver=sqlite", "executor=inprocess"}, "store.driver=sqlite supports one replica only"},
		{[]string{"serviceAccount.create=false"}, "serviceAccount.name is required"},
		{[]string{"ingress.enabled=true"}, "ingress.enabled needs ingress.hosts"},
		{[]string{"httpRoute.enabled=true"}, "httpRoute.enabled needs httpRoute.parentRefs"},
		{[]string{"podDisruptionBudget.minAvailable=1", "podDisruptionBudget.maxUnavailable=1"}, "not both"},
	} {
		t.Run(strings.Join(tc.sets, ","), func(t *testing.T) {
			_, err := render(chartDir, "posture", "posture-system", tc.sets, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func volume(dep object, name string) map[string]any {
	vs, _ := dig(dep, "spec", "template", "spec", "volumes").([]any)
	for _, v := range vs {
		if m, _ := v.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// env is the value of the container's variable name (its valueFrom when it has no value).
func env(c object, name string) any {
	es, _ := c["env"].([]any)
	for _, e := range es {
		if m, _ := e.(map[string]any); m["name"] == name {
			if v, ok := m["value"]; ok {
				return v
			}
			return m["valueFrom"]
		}
	}
	return nil
}

func mounted(c object, name, path string) bool {
	ms, _ := c["volumeMounts"].([]any)
	for _, m := range ms {
		if dig(m, "name") == name && dig(m, "mountPath") == path {
			return true
		}
	}
	return false
}

func args(c object) []string {
	var out []string
	as, _ := c["args"].([]any)
	for _, a := range as {
		out = append(out, a.(string))
	}
	return out
}

// TestCloudNativePGExample: examples/cloudnativepg's values pass the schema
// and point the manager and worker Jobs at the app Secret CloudNativePG
// writes for the example's Cluster, in the release namespace.
func TestCloudNativePGExample(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "cloudnativepg")
	read := func(name string) map[string]any {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	cluster, vals := read("cluster.yaml"), read("values.yaml")
	if dig(cluster, "kind") != "Cluster" || dig(cluster, "apiVersion") != "postgresql.cnpg.io/v1" {
		t.Fatalf("cluster.yaml is a %v %v, want a CloudNativePG Cluster", dig(cluster, "apiVersion"), dig(cluster, "kind"))
	}
	const namespace = "posture-system"
	if ns := dig(cluster, "metadata", "namespace"); ns != namespace {
		t.Errorf("the Cluster is in %v; its Secret must be in the release namespace %s", ns, namespace)
	}
	appSecret := fmt.Sprint(dig(cluster, "metadata", "name")) + "-app"

	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderValues(chrt, "posture", namespace, vals, nil, false)
	if err != nil {
		t.Fatalf("render with examples/cloudnativepg/values.yaml: %v", err)
	}
	var dep object
	for name, body := range out {
		if strings.HasSuffix(name, "deployment.yaml") {
			if err := yaml.Unmarshal([]byte(body), &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, _ := dig(dep, "spec", "template", "spec", "containers", 0).(map[string]any)
	ref := dig(env(c, "POSTURE_STORE_DSN"), "secretKeyRef")
	if dig(ref, "name") != appSecret || dig(ref, "key") != "uri" {
		t.Errorf("the manager reads its DSN from %v; want key uri of %s", ref, appSecret)
	}
	for _, want := range []string{"--job-store-secret=" + appSecret, "--job-store-secret-key=uri", "--store-driver=postgres"} {
		if !slices.Contains(args(c), want) {
			t.Errorf("manager args %v lack %s (worker Jobs would not find the DSN)", args(c), want)
		}
	}
}

// egressOn lists a NetworkPolicy's egress rules that allow TCP port.
func egressOn(np object, port int) []any {
	var out []any
	rules, _ := dig(np, "spec", "egress").([]any)
	for _, rule := range rules {
		ports, _ := dig(rule, "ports").([]any)
		for _, p := range ports {
			if dig(p, "port") == float64(port) {
				out = append(out, rule)
				break
			}
		}
	}
	return out
}
