package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretSource serves the pair in the Secret to the aggregated server. It is
// a dynamiccertificates.CertKeyContentProvider and ControllerRunner: the
// generic API server calls RunOnce before it listens and Run afterwards, and
// its serving-certificate controller rebuilds the TLS config whenever
// SecretSource reports a new pair. Every replica reads the Secret itself, so
// a renewal by the leader reaches all of them within Interval, without the
// kubelet's volume refresh or a restart.
type SecretSource struct {
	// Reader reads the Secret directly (the manager never caches Secrets).
	Reader     client.Reader
	Namespace  string
	SecretName string
	// Log reports failed rereads; the last good pair keeps being served.
	Log logr.Logger
	// Interval between two reads of the Secret; default 30s.
	Interval time.Duration
	// Bootstrap, when set, is called once when the Secret does not exist
	// yet, so a replica that starts before the leader has issued a
	// certificate creates one rather than failing to listen.
	Bootstrap func(ctx context.Context) error

	mu        sync.Mutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

var (
	_ dynamiccertificates.CertKeyContentProvider = (*SecretSource)(nil)
	_ dynamiccertificates.ControllerRunner       = (*SecretSource)(nil)
)

// Name identifies the provider in the generic server's logs.
func (s *SecretSource) Name() string { return "secret/" + s.Namespace + "/" + s.SecretName }

// CurrentCertKeyContent is the last valid pair read.
func (s *SecretSource) CurrentCertKeyContent() ([]byte, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.key
}

// AddListener registers who is told of a new pair.
func (s *SecretSource) AddListener(l dynamiccertificates.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, l)
}

// RunOnce reads the Secret; it fails when there is no valid pair to serve.
func (s *SecretSource) RunOnce(ctx context.Context) error {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.SecretName}
	var sec corev1.Secret
	err := s.Reader.Get(ctx, key, &sec)
	if apierrors.IsNotFound(err) && s.Bootstrap != nil {
		if err := s.Bootstrap(ctx); err != nil {
			return fmt.Errorf("serving certificate Secret %s: create: %w", key, err)
		}
		err = s.Reader.Get(ctx, key, &sec)
	}
	if err != nil {
		return fmt.Errorf("serving certificate Secret %s: %w", key, err)
	}
	cert, pk := sec.Data[KeyCert], sec.Data[KeyKey]
	if _, err := tls.X509KeyPair(cert, pk); err != nil {
		return fmt.Errorf("serving certificate Secret %s: %s and %s: %w", key, KeyCert, KeyKey, err)
	}
	s.mu.Lock()
	changed := !bytes.Equal(cert, s.cert) || !bytes.Equal(pk, s.key)
	if changed {
		s.cert, s.key = cert, pk
	}
	listeners := s.listeners
	s.mu.Unlock()
	if changed {
		for _, l := range listeners {
			l.Enqueue()
		}
	}
	return nil
}

// Run rereads the Secret every Interval until ctx ends. A failed read keeps
// serving the last good pair.
func (s *SecretSource) Run(ctx context.Context, _ int) {
	interval := s.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
				s.Log.Error(err, "rereading the aggregated API's serving certificate; serving the last good one")
			}
		}
	}
}
