package webhook

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/posture-dev/posture/internal/auth"
)

// Rate limit defaults: per credential, a token bucket.
const (
	DefaultRateLimit = 10.0 // requests per second
	DefaultRateBurst = 20
)

// RateLimiter keeps one token bucket per key (an API key's prefix, a user's
// token, an email signing in). Buckets live in memory: with several replicas
// each applies the limit on its own.
type RateLimiter struct {
	limit rate.Limit
	burst int
	// Now is injectable for tests.
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

// NewRateLimiter allows perSecond requests per key with bursts of burst; a
// perSecond of zero or less turns limiting off (nil).
func NewRateLimiter(perSecond float64, burst int) *RateLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}}
}

func (l *RateLimiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Allow takes one request from key's bucket, or says how long until one is available.
func (l *RateLimiter) Allow(key string) (retryAfter time.Duration, ok bool) {
	if l == nil {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.bucketFor(key, now).limiter.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// evict drops buckets idle long enough to be full again: recreating them
// later gives the same answer.
func (l *RateLimiter) evict(now time.Time) {
	refill := time.Duration(float64(l.burst) / float64(l.limit) * float64(time.Second))
	idle := max(refill, time.Minute)
	for k, b := range l.buckets {
		if now.Sub(b.seen) > idle {
			delete(l.buckets, k)
		}
	}
}

func (l *RateLimiter) tooMany(retryAfter time.Duration) *apiError {
	secs := max(1, int(math.Ceil(retryAfter.Seconds())))
	e := errorf(429, CodeRateLimited, "too many requests with this credential: the limit is %s requests per second with bursts of %d; retry in %d s",
		strconv.FormatFloat(float64(l.limit), 'g', -1, 64), l.burst, secs)
	e.header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	return e
}

// Middleware limits the requests of each authenticated caller: once a
// request's credentials authenticate, the caller's bucket must hold a token,
// else the request is answered 429 rate_limited with Retry-After (before
// 402 and 403, which need no work to answer but would let a caller probe
// without limit otherwise). Failed authentications are not counted against
// anyone's key: the handler answers them 401. The principal travels in the
// request's context, so the handler does not authenticate again.
func (l *RateLimiter) Middleware(a auth.Authenticator, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasCredentials(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.Authenticate(r)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if wait, ok := l.Allow(rateKey(p)); !ok {
			// Metrics label a request by the route the mux would have
			// matched, as the mux itself records it on the request.
			if mux, ok := next.(*http.ServeMux); ok {
				_, r.Pattern = mux.Handler(r)
			}
			writeError(w, l.tooMany(wait))
			return
		}
		inner := r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		next.ServeHTTP(w, inner)
		// The mux recorded the matched route on the copy; the metrics read
		// it from the request they handed down.
		r.Pattern = inner.Pattern
	})
}

// hasCredentials is whether a request carries something to authenticate;
// sign-in and the UI's pages carry none.
func hasCredentials(r *http.Request) bool { return r.Header.Get("Authorization") != "" }

type principalKey struct{}

// principalFrom is the principal Middleware authenticated, if any.
func principalFrom(r *http.Request) (auth.Principal, bool) {
	p, ok := r.Context().Value(principalKey{}).(auth.Principal)
	return p, ok
}

// rateKey is the bucket of a caller: its API key, or for tokens its user.
func rateKey(p auth.Principal) string {
	if p.KeyPrefix != "" {
		return "key:" + p.KeyPrefix
	}
	return fmt.Sprintf("user:%s/%s", p.Tenant, auth.NormalizeEmail(p.User))
}

// bucketFor finds or makes key's bucket; l.mu is held.
func (l *RateLimiter) bucketFor(key string, now time.Time) *bucket {
	l.calls++
	if l.calls%1024 == 0 {
		l.evict(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{limiter: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	return b
}
