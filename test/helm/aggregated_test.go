package main

import (
	"slices"
	"strings"
	"testing"
)

// rulesOf is the rules of a Role or ClusterRole.
func rulesOf(o object) []any { r, _ := o["rules"].([]any); return r }

func strs(v any) []string {
	var out []string
	s, _ := v.([]any)
	for _, x := range s {
		out = append(out, x.(string))
	}
	return out
}

// grants reports whether a rule of o allows verb on group/resource (any
// resourceNames restriction is returned too).
func grants(o object, group, resource, verb string) (ok bool, names []string) {
	for _, r := range rulesOf(o) {
		if slices.Contains(strs(dig(r, "apiGroups")), group) && slices.Contains(strs(dig(r, "resources")), resource) &&
			slices.Contains(strs(dig(r, "verbs")), verb) {
			return true, strs(dig(r, "resourceNames"))
		}
	}
	return false, nil
}

// TestRenderAggregatedAPI: the APIService, its Service and certificate, and
// the RBAC of the aggregated API, per value set.
func TestRenderAggregatedAPI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, r rendered)
	}{
		{"defaults: the manager issues the certificate", nil, func(t *testing.T, r rendered) {
			svc := r.one(t, "APIService", "v1alpha1.data.posture.dev")
			if dig(svc, "spec", "group") != "data.posture.dev" || dig(svc, "spec", "version") != "v1alpha1" ||
				dig(svc, "spec", "service", "name") != "posture-aggregated-api" || dig(svc, "spec", "service", "namespace") != "posture-system" ||
				dig(svc, "spec", "service", "port") != float64(443) {
				t.Errorf("APIService spec %v", svc["spec"])
			}
			if dig(svc, "spec", "caBundle") != nil || dig(svc, "spec", "insecureSkipTLSVerify") != nil {
				t.Errorf("APIService carries caBundle/insecureSkipTLSVerify %v: the manager owns caBundle, and TLS is verified", svc["spec"])
			}
			if a := dig(svc, "metadata", "annotations", "cert-manager.io/inject-ca-from"); a != nil {
				t.Errorf("inject-ca-from %v without cert-manager", a)
			}
			service := r.one(t, "Service", "posture-aggregated-api")
			if dig(service, "spec", "ports", 0, "name") != "https" || dig(service, "spec", "ports", 0, "port") != float64(443) ||
				dig(service, "spec", "ports", 0, "targetPort") != "aggregated-api" {
				t.Errorf("Service ports %v", dig(service, "spec", "ports"))
			}
			_, c := r.manager(t)
			port := false
			for _, p := range c["ports"].([]any) {
				if dig(p, "name") == "aggregated-api" && dig(p, "containerPort") == float64(8443) {
					port = true
				}
			}
			if !port {
				t.Errorf("container ports %v lack aggregated-api 8443 (the Service's targetPort)", c["ports"])
			}
			for _, want := range []string{"--aggregated-api-bind-address=:8443", "--aggregated-api-service=posture-aggregated-api",
				"--aggregated-api-cert-secret=posture-aggregated-api-tls"} {
				if !slices.Contains(args(c), want) {
					t.Errorf("args %v lack %s", args(c), want)
				}
			}
			if !strings.Contains(r.notes, "kubectl get apiservice v1alpha1.data.posture.dev") || !strings.Contains(r.notes, "from the manager, Secret posture-aggregated-api-tls") {
				t.Errorf("NOTES do not say how to check the aggregated API:\n%s", r.notes)
			}
			if len(r.all("Certificate")) != 0 || len(r.all("Issuer")) != 0 {
				t.Errorf("cert-manager objects rendered without certManager.enabled")
			}

			// The manager's new rights reach one Secret and one APIService.
			role, cr := r.one(t, "Role", "posture"), r.one(t, "ClusterRole", "posture")
			if ok, names := grants(role, "", "secrets", "update"); !ok || !slices.Equal(names, []string{"posture-aggregated-api-tls"}) {
				t.Errorf("the manager's Role updates Secrets %v (ok %v), want only posture-aggregated-api-tls", names, ok)
			}
			if ok, names := grants(cr, "apiregistration.k8s.io", "apiservices", "patch"); !ok || !slices.Equal(names, []string{"v1alpha1.data.posture.dev"}) {
				t.Errorf("the manager patches APIServices %v (ok %v), want only v1alpha1.data.posture.dev", names, ok)
			}
			if ok, _ := grants(cr, "", "secrets", "update"); ok {
				t.Error("the manager's ClusterRole updates Secrets cluster-wide")
			}

			delegator := r.one(t, "ClusterRoleBinding", "posture-auth-delegator")
			if dig(delegator, "roleRef", "name") != "system:auth-delegator" || dig(delegator, "subjects", 0, "name") != "posture" ||
				dig(delegator, "subjects", 0, "namespace") != "posture-system" {
				t.Errorf("auth-delegator binding %v", delegator)
			}
			reader := r.one(t, "RoleBinding", "posture-auth-reader")
			if dig(reader, "metadata", "namespace") != "kube-system" || dig(reader, "roleRef", "kind") != "Role" ||
				dig(reader, "roleRef", "name") != "extension-apiserver-authentication-reader" || dig(reader, "subjects", 0, "name") != "posture" {
				t.Errorf("authentication reader binding %v", reader)
			}

			uploader := r.one(t, "ClusterRole", "posture-uploader")
			if ok, _ := grants(uploader, "data.posture.dev", "uploads", "create"); !ok {
				t.Errorf("posture-uploader rules %v lack create uploads", rulesOf(uploader))
			}
			if ok, _ := grants(uploader, "posture.dev", "ingestions", "get"); !ok {
				t.Errorf("posture-uploader rules %v lack get ingestions", rulesOf(uploader))
			}
			for _, res := range []string{"findings", "scans"} {
				if ok, _ := grants(uploader, "data.posture.dev", res, "list"); ok {
					t.Errorf("posture-uploader reads %s", res)
				}
			}
			if dig(uploader, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-view") != nil {
				t.Error("posture-uploader is aggregated into view")
			}

			view, edit := r.one(t, "ClusterRole", "posture-view"), r.one(t, "ClusterRole", "posture-edit")
			for _, res := range []string{"findings", "scans", "ingestionerrors"} {
				for _, verb := range []string{"get", "list"} {
					if ok, _ := grants(view, "data.posture.dev", res, verb); !ok {
						t.Errorf("view cannot %s %s", verb, res)
					}
				}
			}
			if ok, _ := grants(view, "data.posture.dev", "uploads", "create"); ok {
				t.Error("view may upload")
			}
			if ok, _ := grants(edit, "data.posture.dev", "uploads", "create"); !ok {
				t.Errorf("edit rules %v lack create uploads", rulesOf(edit))
			}
		}},
		{"cert-manager with its own CA", []string{"aggregatedAPI.certManager.enabled=true"}, func(t *testing.T, r rendered) {
			svc := r.one(t, "APIService", "v1alpha1.data.posture.dev")
			if a := dig(svc, "metadata", "annotations", "cert-manager.io/inject-ca-from"); a != "posture-system/posture-aggregated-api" {
				t.Errorf("inject-ca-from %v, want posture-system/posture-aggregated-api (the serving Certificate)", a)
			}
			cert := r.one(t, "Certificate", "posture-aggregated-api")
			if dig(cert, "spec", "secretName") != "posture-aggregated-api-tls" || dig(cert, "spec", "issuerRef", "name") != "posture-aggregated-api-ca" {
				t.Errorf("Certificate spec %v", cert["spec"])
			}
			if !slices.Contains(strs(dig(cert, "spec", "dnsNames")), "posture-aggregated-api.posture-system.svc") {
				t.Errorf("dnsNames %v lack the name kube-aggregator dials", dig(cert, "spec", "dnsNames"))
			}
			ca := r.one(t, "Certificate", "posture-aggregated-api-ca")
			if dig(ca, "spec", "isCA") != true || dig(ca, "spec", "issuerRef", "name") != "posture-aggregated-api-selfsigned" {
				t.Errorf("CA Certificate spec %v", ca["spec"])
			}
			if got := names(r.all("Issuer")); !slices.Equal(got, []string{"posture-aggregated-api-ca", "posture-aggregated-api-selfsigned"}) {
				t.Errorf("Issuers %v", got)
			}
			dep, c := r.manager(t)
			if !slices.Contains(args(c), "--aggregated-api-cert-dir=/etc/posture/aggregated-api-tls") || !mounted(c, "aggregated-api-tls", "/etc/posture/aggregated-api-tls") {
				t.Errorf("the manager does not serve from cert-manager's Secret: args %v mounts %v", args(c), c["volumeMounts"])
			}
			if v := volume(dep, "aggregated-api-tls"); dig(v, "secret", "secretName") != "posture-aggregated-api-tls" {
				t.Errorf("volume %v", v)
			}
			for _, a := range args(c) {
				if strings.HasPrefix(a, "--aggregated-api-cert-secret") {
					t.Errorf("%s with cert-manager: two writers of one Secret", a)
				}
			}
		}},
		{"cert-manager with a given issuer", []string{"aggregatedAPI.certManager.enabled=true", "aggregatedAPI.certManager.issuerRef.name=corp-ca",
			"aggregatedAPI.certManager.issuerRef.kind=ClusterIssuer", "aggregatedAPI.certManager.duration=2160h"}, func(t *testing.T, r rendered) {
			if is := r.all("Issuer"); len(is) != 0 {
				t.Errorf("Issuers %v rendered although one was given", names(is))
			}
			cert := r.one(t, "Certificate", "posture-aggregated-api")
			if dig(cert, "spec", "issuerRef", "name") != "corp-ca" || dig(cert, "spec", "issuerRef", "kind") != "ClusterIssuer" || dig(cert, "spec", "duration") != "2160h" {
				t.Errorf("Certificate spec %v", cert["spec"])
			}
		}},
		{"disabled", []string{"aggregatedAPI.enabled=false"}, func(t *testing.T, r rendered) {
			if s := r.all("APIService"); len(s) != 0 {
				t.Errorf("APIService rendered when disabled")
			}
			for _, o := range r.objs {
				if strings.Contains(o.name(), "aggregated-api") || o.name() == "posture-uploader" || o.name() == "posture-auth-reader" {
					t.Errorf("%s %s rendered when disabled", o.kind(), o.name())
				}
			}
			_, c := r.manager(t)
			for _, a := range args(c) {
				if strings.HasPrefix(a, "--aggregated-api") {
					t.Errorf("arg %s when disabled", a)
				}
			}
			if ok, _ := grants(r.one(t, "ClusterRole", "posture-view"), "data.posture.dev", "findings", "list"); ok {
				t.Error("view reads findings of an API that is not installed")
			}
		}},
		{"fullnameOverride names the Secret the manager may update", []string{"fullnameOverride=sec"}, func(t *testing.T, r rendered) {
			if ok, names := grants(r.one(t, "Role", "sec"), "", "secrets", "update"); !ok || !slices.Equal(names, []string{"sec-aggregated-api-tls"}) {
				t.Errorf("Secrets updated %v (ok %v), want sec-aggregated-api-tls", names, ok)
			}
			_, c := r.manager(t)
			if !slices.Contains(args(c), "--aggregated-api-cert-secret=sec-aggregated-api-tls") {
				t.Errorf("args %v", args(c))
			}
			if dig(r.one(t, "APIService", "v1alpha1.data.posture.dev"), "spec", "service", "name") != "sec-aggregated-api" {
				t.Error("the APIService does not route to the renamed Service")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, renderSet(t, tc.sets...)) })
	}
}
