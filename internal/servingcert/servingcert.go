// Package servingcert issues the aggregated API's serving certificate from a
// self-signed CA the operator keeps in a Secret, decides when either needs
// renewing, and hands the current pair to the aggregated server so that a
// renewal takes effect without a restart.
//
// The Secret (type kubernetes.io/tls) holds:
//
//	tls.crt, tls.key  the serving certificate and its key
//	ca.crt            the CA that signed it, followed by the previous CA while
//	                  that one is still valid, so the APIService's caBundle
//	                  trusts replicas that have not reloaded yet
//	ca.key            the key of the first CA in ca.crt
package servingcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Keys of the Secret.
const (
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
	KeyCA     = "ca.crt"
	KeyCAKey  = "ca.key"
	caSubject = "posture-aggregated-api-ca"
)

// Bundle is what the Secret holds, in PEM.
type Bundle struct {
	Cert, Key []byte
	// CAs is the signing CA first, then older CAs still trusted.
	CAs   []byte
	CAKey []byte
}

// FromData reads a Bundle from a Secret's data.
func FromData(data map[string][]byte) Bundle {
	return Bundle{Cert: data[KeyCert], Key: data[KeyKey], CAs: data[KeyCA], CAKey: data[KeyCAKey]}
}

// Data is the Secret's data for b.
func (b Bundle) Data() map[string][]byte {
	return map[string][]byte{KeyCert: b.Cert, KeyKey: b.Key, KeyCA: b.CAs, KeyCAKey: b.CAKey}
}

// Policy says how long certificates live and which names the serving one
// covers.
type Policy struct {
	DNSNames     []string
	CAValidity   time.Duration
	CertValidity time.Duration
}

// Default validities. A CA outlives many serving certificates, so the
// APIService's caBundle changes rarely.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
)

// renewAt is when a certificate is due: two thirds into its life, which
// leaves a third of it for the renewal to reach every replica.
func renewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(life * 2 / 3)
}

// Plan is what Ensure decided.
type Plan struct {
	Bundle Bundle
	// Changed is false when b was kept as it was.
	Changed bool
	// Reason says why it changed (empty when not), for the log.
	Reason string
	// Next is when the bundle is next due for renewal.
	Next time.Time
}

// Ensure returns b, or a renewed bundle when the CA or the serving
// certificate is missing, unreadable, due (two thirds into its life), or no
// longer matches the policy's names.
func Ensure(b Bundle, p Policy, now time.Time) (Plan, error) {
	if len(p.DNSNames) == 0 {
		return Plan{}, errors.New("servingcert: no DNS names for the serving certificate")
	}
	caValidity, certValidity := p.CAValidity, p.CertValidity
	if caValidity <= 0 {
		caValidity = DefaultCAValidity
	}
	if certValidity <= 0 {
		certValidity = DefaultCertValidity
	}

	cas, caErr := parseCerts(b.CAs)
	caKey, keyErr := parseKey(b.CAKey)
	var reason string
	switch {
	case len(b.CAs) == 0:
		reason = "no CA yet"
	case caErr != nil:
		reason = "ca.crt unreadable: " + caErr.Error()
	case keyErr != nil:
		reason = "ca.key unreadable: " + keyErr.Error()
	case len(cas) == 0:
		reason = "ca.crt holds no certificate"
	case !publicKeyMatches(cas[0], caKey):
		reason = "ca.key does not belong to the first certificate of ca.crt"
	case !now.Before(renewAt(cas[0])):
		reason = fmt.Sprintf("CA due for renewal (expires %s)", cas[0].NotAfter.UTC().Format(time.RFC3339))
	}
	out := b
	if reason != "" {
		caPEM, keyPEM, err := newCA(now, caValidity)
		if err != nil {
			return Plan{}, err
		}
		// The previous CA stays trusted until it expires: replicas still
		// serving a certificate it signed keep working.
		bundle := slices.Clone(caPEM)
		if len(cas) > 0 && now.Before(cas[0].NotAfter) && caErr == nil {
			bundle = append(bundle, encodeCert(cas[0].Raw)...)
		}
		out = Bundle{CAs: bundle, CAKey: keyPEM}
		cas, _ = parseCerts(out.CAs)
		caKey, _ = parseKey(out.CAKey)
	} else if pruned := pruneExpired(cas, now); len(pruned) != len(cas) {
		cas = pruned
		out.CAs = encodeCerts(cas)
		reason = "expired CA dropped from ca.crt"
	}

	certReason := ""
	leaf, leafErr := leafOf(out.Cert, out.Key)
	switch {
	case reason != "" && !bytes.Equal(out.CAKey, b.CAKey):
		certReason = "new CA"
	case len(out.Cert) == 0:
		certReason = "no serving certificate yet"
	case leafErr != nil:
		certReason = "serving certificate unreadable: " + leafErr.Error()
	case leaf.CheckSignatureFrom(cas[0]) != nil:
		certReason = "serving certificate not signed by the current CA"
	case !slices.Equal(sorted(leaf.DNSNames), sorted(p.DNSNames)):
		certReason = fmt.Sprintf("serving certificate names %v, want %v", leaf.DNSNames, p.DNSNames)
	case !now.Before(renewAt(leaf)):
		certReason = fmt.Sprintf("serving certificate due for renewal (expires %s)", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if certReason != "" {
		cert, key, err := newServing(cas[0], caKey, p.DNSNames, now, certValidity)
		if err != nil {
			return Plan{}, err
		}
		out.Cert, out.Key = cert, key
		leaf, _ = leafOf(out.Cert, out.Key)
		if reason == "" {
			reason = certReason
		}
	}
	next := renewAt(leaf)
	if ca := renewAt(cas[0]); ca.Before(next) {
		next = ca
	}
	return Plan{Bundle: out, Changed: reason != "", Reason: reason, Next: next}, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func pruneExpired(cas []*x509.Certificate, now time.Time) []*x509.Certificate {
	keep := cas[:1:1]
	for _, c := range cas[1:] {
		if now.Before(c.NotAfter) {
			keep = append(keep, c)
		}
	}
	return keep
}

func newCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", caSubject, now.Unix())},
		NotBefore:             now.Add(-time.Minute), // clock skew between replicas
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("servingcert: create CA: %w", err)
	}
	return encodeCert(der), encodeKey(key), nil
}

func newServing(ca *x509.Certificate, caKey crypto.Signer, names []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("servingcert: create serving certificate: %w", err)
	}
	return encodeCert(der), encodeKey(key), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeCerts(cs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range cs {
		out = append(out, encodeCert(c.Raw)...)
	}
	return out
}

func encodeKey(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // an ecdsa P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// parseCerts reads every CERTIFICATE block; an error names the block's index.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for i := 0; ; i++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", i, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

func publicKeyMatches(c *x509.Certificate, k crypto.Signer) bool {
	pub, ok := k.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(c.PublicKey)
}

// leafOf parses the serving certificate and checks its key belongs to it.
func leafOf(certPEM, keyPEM []byte) (*x509.Certificate, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("tls.crt holds no certificate")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.key: %w", err)
	}
	if !publicKeyMatches(certs[0], key) {
		return nil, errors.New("tls.key does not belong to tls.crt")
	}
	return certs[0], nil
}
