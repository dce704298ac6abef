package sources

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/termsafe"
)

// maxRedirects bounds the redirects a url source may follow.
const maxRedirects = 5

// getURL starts the GET of a url source. The caller closes the body and
// then calls cancel, which ends the fetch's deadline.
func (r *Reader) getURL(ctx context.Context, ns string, src *posturev1.URLSource, limit int64) (*http.Response, context.CancelFunc, error) {
	shown := redactURL(src.URL)
	u, err := url.Parse(src.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url %s is not an https URL", shown)
	}
	if u.User != nil {
		// Messages, events and the object itself would show them.
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url must not carry credentials (user:password@)")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if ref := src.CABundleSecretRef; ref != nil {
		pem, err := r.readSecretKey(ctx, ns, ref, "spec.source.url.caBundleSecretRef")
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.caBundleSecretRef: key %s of Secret %s/%s holds no PEM certificate", ref.Key, ns, ref.Name)
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: r.checkAddress}
	client := &http.Client{
		Transport: &http.Transport{
			// No proxy: a proxy would reach the addresses checkAddress refuses.
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSClientConfig:       tlsConfig,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			DisableKeepAlives:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return permanent(ingest.CodeUnreadable, "%s redirected to %s URL %s; only https is followed", shown, req.URL.Scheme, redactURL(req.URL.String()))
			}
			if len(via) > maxRedirects {
				return permanent(ingest.CodeUnreadable, "%s redirected more than %d times", shown, maxRedirects)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, r.Options.Timeout())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url %s: %v", shown, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		var se *Error
		if errors.As(err, &se) {
			return nil, nil, se
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			// Its text repeats the URL, query included.
			err = ue.Err
		}
		var cert *tls.CertificateVerificationError
		if errors.As(err, &cert) {
			return nil, nil, permanent(ingest.CodeUnreadable, "fetching %s: the server's certificate is not trusted (%v); set spec.source.url.caBundleSecretRef to its CA", shown, cert.Err)
		}
		return nil, nil, transient("fetching %s: %v", shown, err)
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		resp.Body.Close()
		cancel()
		return nil, nil, transient("fetching %s: the server answered %s", shown, termsafe.String(resp.Status))
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		cancel()
		return nil, nil, permanent(ingest.CodeUnreadable, "fetching %s: the server answered %s, want 200 OK", shown, termsafe.String(resp.Status))
	case resp.ContentLength > limit:
		resp.Body.Close()
		cancel()
		return nil, nil, permanent(CodeTooLarge, "%s is %d bytes, larger than the limit of %d bytes", "URL "+shown, resp.ContentLength, limit)
	}
	return resp, cancel, nil
}

// metadataAddresses are cloud instance metadata endpoints outside the
// link-local range (AWS's IPv6 one).
var metadataAddresses = []netip.Addr{netip.MustParseAddr("fd00:ec2::254")}

// checkAddress refuses, at connect time (so after DNS, which a hostile
// name could point anywhere), the addresses a url source must not reach
// from inside the cluster: loopback, link-local (instance metadata at
// 169.254.169.254 among them), unspecified, multicast and known metadata
// endpoints. Loopback is allowed only with Options.AllowLoopback.
func (r *Reader) checkAddress(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return permanent(ingest.CodeUnreadable, "unusable address %s: %v", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return permanent(ingest.CodeUnreadable, "unusable address %s: %v", address, err)
	}
	ip = ip.Unmap()
	refused := ""
	switch {
	case ip.IsLoopback():
		if !r.Options.AllowLoopback {
			refused = "loopback"
		}
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		refused = "link-local (cloud instance metadata lives there)"
	case ip.IsUnspecified():
		refused = "unspecified"
	case ip.IsMulticast():
		refused = "multicast"
	}
	for _, m := range metadataAddresses {
		if ip == m {
			refused = "a cloud instance metadata endpoint"
		}
	}
	if refused != "" {
		return permanent(ingest.CodeUnreadable, "spec.source.url: address %s is %s; the manager does not fetch reports from it", ip, refused)
	}
	return nil
}
