package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/webhook"
)

// findMetric is the first series of the named metric in controller-runtime's
// registry, the one the manager serves on /metrics, whose labels hold every
// name=value pair given; nil when there is none.
func findMetric(t testing.TB, name string, labels ...string) *dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelOf(m, labels[i]) != labels[i+1] {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// metricValue reads a counter or gauge; a series that does not exist reads 0.
func metricValue(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	m := findMetric(t, name, labels...)
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// logLines records what the server logs, one line per call, for tests that
// check what is (and is not) logged.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger { return logr.New(&lineSink{to: l}) }

func (l *logLines) matching(fragment string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, fragment) {
			out = append(out, line)
		}
	}
	return out
}

type lineSink struct {
	to     *logLines
	values []any
}

func (s *lineSink) Init(logr.RuntimeInfo)  {}
func (s *lineSink) Enabled(level int) bool { return true }
func (s *lineSink) Info(_ int, msg string, kv ...any) {
	s.to.mu.Lock()
	s.to.lines = append(s.to.lines, fmt.Sprintf("%s %v", msg, append(append([]any{}, s.values...), kv...)))
	s.to.mu.Unlock()
}
func (s *lineSink) Error(err error, msg string, kv ...any) {
	s.Info(0, "ERROR "+msg+": "+fmt.Sprint(err), kv...)
}
func (s *lineSink) WithValues(kv ...any) logr.LogSink {
	return &lineSink{to: s.to, values: append(append([]any{}, s.values...), kv...)}
}
func (s *lineSink) WithName(string) logr.LogSink { return s }

func TestSignInThrottledPerAddressAndAccount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trust   bool
		forward func(i int) string // X-Forwarded-For of attempt i; "" for none
		email   func(te *tenancyEnv, i int) string
		// want429 is the attempt (1-based) answered 429 first; 0 for none of 40.
		want429 int
		reason  string
		detail  string
	}{
		{
			name: "one address, many unknown emails", email: unknownEmail,
			want429: 11, reason: "throttled_address", detail: "from this address",
		},
		{
			name: "a forged X-Forwarded-For is not trusted by default", email: unknownEmail,
			forward: func(i int) string { return fmt.Sprintf("203.0.113.%d", i) },
			want429: 11, reason: "throttled_address", detail: "from this address",
		},
		{
			name: "IPv6 addresses of one /64 share a bucket", trust: true, email: unknownEmail,
			forward: func(i int) string { return fmt.Sprintf("2001:db8:1:2::%x", i) },
			want429: 11, reason: "throttled_address", detail: "from this address",
		},
		{
			name: "behind a trusted proxy, one account from many addresses", trust: true,
			email:   func(te *tenancyEnv, _ int) string { return te.emails["demo-admin"] },
			forward: func(i int) string { return fmt.Sprintf("198.51.100.7, 203.0.113.%d", i) },
			want429: 11, reason: "throttled_account", detail: "for this account",
		},
		{
			name: "behind a trusted proxy, many addresses and emails", trust: true, email: unknownEmail,
			forward: func(i int) string { return fmt.Sprintf("203.0.113.%d", i) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logLines{}
			clock := &testClock{t: time.Now()}
			te := startTenancy(t, tenancyOpts{server: func(s *webhook.Server) {
				s.Log = logs.logger()
				s.SignIn = &webhook.SignInGuard{TrustForwardedFor: tc.trust, Now: clock.Now}
			}})
			before := map[string]float64{}
			for _, r := range []string{"invalid_credentials", "throttled_address", "throttled_account"} {
				before[r] = metricValue(t, "posture_signin_failures_total", "reason", r)
			}
			attempt := func(i int, email, password string) response {
				h := http.Header{"Content-Type": {"application/vnd.api+json"}}
				if tc.forward != nil {
					h.Set("X-Forwarded-For", tc.forward(i))
				}
				return te.as(t, "").request(http.MethodPost, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": password}), h)
			}
			first429, failures := 0, 0
			for i := 1; i <= 40; i++ {
				r := attempt(i, tc.email(te, i), fmt.Sprintf("guess-%d-not-it", i))
				if r.status == http.StatusTooManyRequests {
					wantError(t, r, 429, "rate_limited", "", tc.detail)
					if ra := r.header.Get("Retry-After"); ra != "6" {
						t.Errorf("Retry-After = %q, want 6 (one failure more every six seconds)", ra)
					}
					first429 = i
					break
				}
				wantError(t, r, 401, "not_authenticated", "*", "invalid email or password")
				failures++
			}
			if first429 != tc.want429 {
				t.Fatalf("first 429 at attempt %d, want %d (0: none)", first429, tc.want429)
			}

			// One line per failure, naming the email and the client, never the password.
			if got := logs.matching("sign-in failed"); len(got) != failures+min(first429, 1) {
				t.Errorf("%d sign-in failure lines for %d failures and %d refusals: %q", len(got), failures, min(first429, 1), got)
			}
			if leaked := logs.matching("guess-"); len(leaked) > 0 {
				t.Errorf("a password reached the log: %q", leaked)
			}
			for i := 1; i <= failures; i++ {
				client := "127.0.0.1"
				if tc.trust {
					client = tc.forward(i)[strings.LastIndex(tc.forward(i), " ")+1:]
					if strings.Contains(client, ":") {
						client = "2001:db8:1:2::/64"
					}
				}
				if len(logs.matching("email "+tc.email(te, i)+" client "+client+" reason invalid_credentials")) == 0 {
					t.Errorf("no failure line names %s from %s", tc.email(te, i), client)
				}
			}
			if got := metricValue(t, "posture_signin_failures_total", "reason", "invalid_credentials") - before["invalid_credentials"]; got != float64(failures) {
				t.Errorf("posture_signin_failures_total{reason=invalid_credentials} rose by %v, want %d", got, failures)
			}
			if tc.reason != "" {
				if got := metricValue(t, "posture_signin_failures_total", "reason", tc.reason) - before[tc.reason]; got != 1 {
					t.Errorf("posture_signin_failures_total{reason=%s} rose by %v, want 1", tc.reason, got)
				}
				// Throttled means throttled: the right password waits too,
				// until the bucket holds one more failure.
				email := te.emails["demo-admin"]
				wantError(t, attempt(first429, email, te.pw[email]), 429, "rate_limited", "")
				clock.Advance(6 * time.Second)
				wantTokens(t, attempt(first429, email, te.pw[email]))
			}
		})
	}
}

func unknownEmail(_ *tenancyEnv, i int) string { return fmt.Sprintf("nobody-%d@example.com", i) }

// gatedIssuer counts the sign-ins being checked at once and holds each until
// the gate opens, so a test sees how many the server lets in together.
type gatedIssuer struct {
	next webhook.TokenIssuer
	gate chan struct{}

	mu             sync.Mutex
	inFlight, peak int
}

func (g *gatedIssuer) Login(ctx context.Context, tenant, email, password string) (auth.TokenPair, error) {
	g.mu.Lock()
	g.inFlight++
	g.peak = max(g.peak, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	<-g.gate
	return g.next.Login(ctx, tenant, email, password)
}

func (g *gatedIssuer) Refresh(ctx context.Context, refresh string) (auth.TokenPair, error) {
	return g.next.Refresh(ctx, refresh)
}

func (g *gatedIssuer) SignOut(ctx context.Context, token string) error {
	return g.next.SignOut(ctx, token)
}

func (g *gatedIssuer) counts() (inFlight, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.peak
}

func TestSignInConcurrencyCap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cap       int
		queueWait time.Duration
		callers   int
		// busy is how many callers find no slot within queueWait (429).
		busy int
	}{
		{"callers over the cap wait their turn", 2, time.Minute, 6, 0},
		{"callers over the cap give up after the queue wait", 1, 50 * time.Millisecond, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gated *gatedIssuer
			te := startTenancy(t, tenancyOpts{server: func(s *webhook.Server) {
				s.SignIn = &webhook.SignInGuard{Concurrency: tc.cap, QueueWait: tc.queueWait}
				gated = &gatedIssuer{next: s.Tokens, gate: make(chan struct{})}
				s.Tokens = gated
			}})
			// A failing test must still open the gate, or the server's
			// shutdown waits forever for the held requests.
			var open sync.Once
			openGate := func() { open.Do(func() { close(gated.gate) }) }
			t.Cleanup(openGate)
			busyBefore := metricValue(t, "posture_signin_failures_total", "reason", "busy")
			email := te.emails["demo-admin"]
			results := make(chan response, tc.callers)
			for range tc.callers {
				go func() {
					results <- te.post(t, "/api/v1/tokens", tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]}), "application/json")
				}()
			}
			// Every caller is either being checked or accounted for by the
			// server (waiting for a slot, or refused as expected); only then
			// is the peak final. Without a cap all of them end up being
			// checked at once.
			eventually(t, 20*time.Second, "every caller checked, waiting or refused", func() string {
				inFlight, _ := gated.counts()
				waiting := metricValue(t, "posture_signin_waiting")
				busy := metricValue(t, "posture_signin_failures_total", "reason", "busy") - busyBefore
				if inFlight+int(waiting)+int(busy) != tc.callers || int(busy) < tc.busy {
					return fmt.Sprintf("%d checked, %v waiting, %v refused", inFlight, waiting, busy)
				}
				return ""
			})
			openGate()
			statuses := map[int]int{}
			for range tc.callers {
				r := <-results
				statuses[r.status]++
				if r.status == http.StatusTooManyRequests {
					wantError(t, r, 429, "rate_limited", "", "as many passwords as it allows at once")
					if r.header.Get("Retry-After") != "1" {
						t.Errorf("busy 429 with Retry-After %q, want 1", r.header.Get("Retry-After"))
					}
				}
			}
			if _, peak := gated.counts(); peak > tc.cap {
				t.Errorf("%d passwords were checked at once; the cap is %d", peak, tc.cap)
			}
			if statuses[200] != tc.callers-tc.busy || statuses[429] != tc.busy {
				t.Errorf("statuses %v; want %d × 200 and %d × 429", statuses, tc.callers-tc.busy, tc.busy)
			}
			if got := metricValue(t, "posture_signin_waiting"); got != 0 {
				t.Errorf("posture_signin_waiting = %v after every caller is done", got)
			}
		})
	}
}
