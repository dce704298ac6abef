package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/localsystem"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store/pgtest"
	"golang.org/x/time/rate"
)

// Upload limits of the manager under soak: large enough for the largest
// report, small enough that an over-size upload costs seconds, not minutes.
const (
	maxUploadFull  = 64 << 20
	maxUploadShort = 8 << 20
)

// The pace of each credential, below the server's default limit of 10 a
// second with bursts of 20.
const (
	pacePerSecond = 8
	paceBurst     = 8
)

// startSystem starts a throwaway PostgreSQL and the local system on it, as
// make dev runs it, with the soak's tenants, and a Kubernetes user per
// tenant bound to view and edit in its namespace. The manager's and MCP
// server's lines go to log.
func (w *world) startSystem(ctx context.Context, log io.Writer) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	w.logf("starting a throwaway PostgreSQL")
	dsn, stopPG, err := pgtest.Start()
	if err != nil {
		return nil, err
	}
	stops = append(stops, stopPG)
	w.dsn = dsn

	w.maxUpload = maxUploadFull
	if w.cfg.Short {
		w.maxUpload = maxUploadShort
	}
	addrs := make([]string, 4)
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	w.logf("starting the system as make dev does, on PostgreSQL (manager, aggregated API through kube-apiserver, MCP server)")
	sys, err := localsystem.Start(ctx, localsystem.Options{
		Dir:            w.cfg.Dir,
		BinDir:         w.cfg.BinDir,
		APIAddr:        addrs[0],
		MCPAddr:        addrs[1],
		MetricsAddr:    addrs[2],
		AggregatedAddr: addrs[3],
		StoreDriver:    "postgres",
		StoreDSN:       dsn,
		StoreLabel:     "a throwaway PostgreSQL",
		ManagerArgs:    []string{fmt.Sprintf("--max-upload-bytes=%d", w.maxUpload)},
		Tenants:        soakTenants(),
		Out:            log,
		Step:           func(s string) { fmt.Fprintln(log, "==> "+s) },
	})
	if err != nil {
		return nil, err
	}
	stops = append(stops, sys.Stop)
	w.sys = sys
	// From here on a crash of the manager or the MCP server is restarted,
	// as make dev restarts it.
	sys.Programs.Arm()

	w.hc = &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 200, MaxIdleConnsPerHost: 100, IdleConnTimeout: 30 * time.Second,
	}}
	base, err := restapi.ParseBaseURL(sys.APIURL)
	if err != nil {
		return nil, err
	}
	w.api = restapi.New(base, w.hc, "posture-soak")
	w.kube = rest.CopyConfig(sys.Config)
	w.kube.QPS, w.kube.Burst = -1, 0

	byTenant := map[string][]int{}
	for i, u := range sys.Seed.Users {
		byTenant[u.Tenant] = append(byTenant[u.Tenant], i)
	}
	for ti, name := range tenantNames[:tenantsWithSubscription] {
		t := &tenant{idx: ti, name: name, ns: "tenant-" + name, kubeUser: "soak:" + name,
			byID: map[string]*upload{}, seenIngestions: map[string]string{},
			// Disjoint record ranges: no two reports of the run share a
			// finding uid unless one is a re-upload of the other.
			next: ti * 1_000_000_000}
		for k := range accountsPerTenant {
			t.accounts = append(t.accounts, accountOf(ti, k))
		}
		if t.gen, err = reportgen.NewFor(t.accounts); err != nil {
			return nil, err
		}
		for _, i := range byTenant[name] {
			u := sys.Seed.Users[i]
			switch {
			case strings.HasPrefix(u.Email, "admin@"):
				t.admin = u
			case strings.HasPrefix(u.Email, "viewer@"):
				t.viewer = u
			case strings.HasPrefix(u.Email, "agent@"):
				t.agent = u
			}
		}
		for _, p := range []**rate.Limiter{&t.adminPace, &t.viewerPace, &t.userPace, &t.agentPace} {
			*p = rate.NewLimiter(pacePerSecond, paceBurst)
		}
		if err := bindKubeUser(ctx, sys.Admin, t); err != nil {
			return nil, err
		}
		w.tenants = append(w.tenants, t)
	}
	for _, i := range byTenant["nosub"] {
		w.nosub = sys.Seed.Users[i]
	}
	return stop, nil
}

// bindKubeUser lets the tenant's Kubernetes user read (view) and upload
// and follow its uploads (posture-uploader) in its namespace alone, as the
// RoleBindings of docs/kubernetes-api.md would in a cluster.
func bindKubeUser(ctx context.Context, c client.Client, t *tenant) error {
	for _, role := range []string{"view", "posture-uploader"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "soak-" + role, Namespace: t.ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: t.kubeUser}},
		}
		if err := c.Create(ctx, rb); err != nil {
			return fmt.Errorf("bind %s to %s in %s: %w", t.kubeUser, role, t.ns, err)
		}
	}
	// kube-apiserver authorizes from an informer's copy of the bindings:
	// the load must not start before it holds them (an upload 2 ms into a
	// soak was refused 403). Its answer to a SubjectAccessReview is that of
	// the same authorizer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: t.kubeUser,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: t.ns, Verb: "create", Group: "data.posture.dev", Resource: "uploads",
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			return fmt.Errorf("ask whether %s may upload in %s: %w", t.kubeUser, t.ns, err)
		}
		if sar.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s may still not upload in %s 30 s after its RoleBindings: %s", t.kubeUser, t.ns, sar.Status.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
