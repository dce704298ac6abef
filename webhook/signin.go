package webhook

import (
	"context"
	"math"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/posture-dev/posture/internal/auth"
)

// Sign-in limits by default: ten failed sign-ins in a row from one client
// address, or for one email, then one more every six seconds.
const (
	DefaultSignInFailuresPerMinute = 10.0
	DefaultSignInFailureBurst      = 10
	DefaultSignInQueueWait         = time.Second
)

// Reasons of posture_signin_failures_total.
const (
	signInBadCredentials   = "invalid_credentials"
	signInThrottledAddress = "throttled_address"
	signInThrottledAccount = "throttled_account"
	signInBusy             = "busy"
	signInError            = "error"
)

var (
	signInFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "posture_signin_failures_total",
		Help: "Password sign-ins (POST /api/v1/tokens) that did not issue tokens, by reason: invalid_credentials, throttled_address, throttled_account, busy (no password-check slot in time), error.",
	}, []string{"reason"})
	signInWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "posture_signin_waiting",
		Help: "Sign-ins waiting for a password-check slot (--sign-in-concurrency).",
	})
	signInChecking = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "posture_signin_checking",
		Help: "Sign-ins whose password is being checked (bcrypt) now.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(signInFailures, signInWaiting, signInChecking)
	// Every reason is exported from the start, so a rate() over it has a
	// baseline before the first failure.
	for _, r := range []string{signInBadCredentials, signInThrottledAddress, signInThrottledAccount, signInBusy, signInError} {
		signInFailures.WithLabelValues(r)
	}
}

// SignInGuard protects password sign-in (POST /api/v1/tokens), where every
// attempt costs a bcrypt comparison (tens of milliseconds of CPU):
//
//   - Failed sign-ins are counted per client address and per email, each in a
//     token bucket; an empty bucket answers 429 with Retry-After before any
//     password is checked, even a right one. Successful sign-ins cost
//     nothing: only failures use up an address's or an account's allowance.
//   - At most Concurrency passwords are checked at once; a sign-in over the
//     cap waits up to QueueWait for a slot, then gets 429 with Retry-After,
//     so sign-in cannot take the CPU the rest of the API needs.
//   - Every failed sign-in is logged with the email and client address (never
//     the password) and counted in posture_signin_failures_total.
//
// Buckets live in memory: with several replicas each applies the limits on
// its own.
type SignInGuard struct {
	// FailuresPerMinute refills each bucket (default 10); FailureBurst is
	// how many failures a full bucket holds (default 10).
	FailuresPerMinute float64
	FailureBurst      int
	// Concurrency caps password checks running at once (default half of
	// GOMAXPROCS, at least one).
	Concurrency int
	// QueueWait is how long a sign-in over the cap waits for a slot.
	QueueWait time.Duration
	// TrustForwardedFor takes the client address from the last entry of
	// X-Forwarded-For, the one a reverse proxy in front of the API appended.
	// Only for installs whose every request comes through such a proxy:
	// otherwise a client picks its own address, and its own bucket.
	TrustForwardedFor bool
	// Now is injectable for tests.
	Now func() time.Time

	once     sync.Once
	failures *RateLimiter
	slots    chan struct{}
}

func (g *SignInGuard) init() {
	g.once.Do(func() {
		perMinute := g.FailuresPerMinute
		if perMinute <= 0 {
			perMinute = DefaultSignInFailuresPerMinute
		}
		burst := g.FailureBurst
		if burst <= 0 {
			burst = DefaultSignInFailureBurst
		}
		g.failures = NewRateLimiter(perMinute/60, burst)
		g.failures.Now = g.Now
		n := g.Concurrency
		if n <= 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		g.slots = make(chan struct{}, n)
	})
}

func (g *SignInGuard) queueWait() time.Duration {
	if g.QueueWait > 0 {
		return g.QueueWait
	}
	return DefaultSignInQueueWait
}

// clientAddress is the address sign-in failures are counted against: the
// peer's IP (an IPv6 peer's /64, which one host usually holds whole), or with
// TrustForwardedFor the last X-Forwarded-For entry.
func (g *SignInGuard) clientAddress(r *http.Request) string {
	if g.TrustForwardedFor {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			entries := strings.Split(xff[len(xff)-1], ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(entries[len(entries)-1])); err == nil {
				return addressKey(a)
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return addressKey(a)
	}
	return host
}

func addressKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// throttled answers 429 when the address or the account has no failures left.
func (g *SignInGuard) throttled(client, email string) (*apiError, string) {
	if wait := g.failures.waitFor("addr:" + client); wait > 0 {
		return g.tooMany("from this address", wait), signInThrottledAddress
	}
	if wait := g.failures.waitFor("email:" + auth.NormalizeEmail(email)); wait > 0 {
		return g.tooMany("for this account", wait), signInThrottledAccount
	}
	return nil, ""
}

// failed charges one failure to the address and the account.
func (g *SignInGuard) failed(client, email string) {
	g.failures.charge("addr:" + client)
	g.failures.charge("email:" + auth.NormalizeEmail(email))
}

func (g *SignInGuard) tooMany(what string, wait time.Duration) *apiError {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	e := errorf(429, CodeRateLimited, "too many failed sign-ins %s: %d are allowed in a row, then %s a minute; retry in %d s",
		what, g.failures.burst, strconv.FormatFloat(float64(g.failures.limit)*60, 'g', 4, 64), secs)
	e.header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	return e
}

// slot waits for a password-check slot; release gives it back.
func (g *SignInGuard) slot(ctx context.Context) (release func(), aerr *apiError) {
	select {
	case g.slots <- struct{}{}:
	default:
		signInWaiting.Inc()
		t := time.NewTimer(g.queueWait())
		var got bool
		select {
		case g.slots <- struct{}{}:
			got = true
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		signInWaiting.Dec()
		if !got {
			e := errorf(429, CodeRateLimited, "the server is checking as many passwords as it allows at once (%d); retry in 1 s", cap(g.slots))
			e.header = http.Header{"Retry-After": {"1"}}
			return nil, e
		}
	}
	signInChecking.Inc()
	return func() {
		signInChecking.Dec()
		<-g.slots
	}, nil
}

// waitFor says how long until key's bucket holds a whole token, taking none.
func (l *RateLimiter) waitFor(key string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	tokens := l.bucketFor(key, now).limiter.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}

// charge takes a token from key's bucket, into debt if it is empty: failures
// that were checked concurrently all count.
func (l *RateLimiter) charge(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucketFor(key, now).limiter.ReserveN(now, 1)
}

// signInGuard is the server's guard, ready to use.
func (s *Server) signInGuard() *SignInGuard {
	s.SignIn.init()
	return s.SignIn
}
