package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ca is a certificate authority kept in memory while the cluster's
// certificates are issued, and on disk as <name>.crt/.key.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// certLifetime: a local cluster lives for hours; a year keeps a cluster that
// make cluster left running usable without renewal.
const certLifetime = 365 * 24 * time.Hour

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func newCA(cn string) (*ca, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key}, nil
}

// leaf describes a certificate the CA issues.
type leaf struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
}

func (c *ca) issue(l leaf) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if l.server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     l.dns,
		IPAddresses:  l.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func (c *ca) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
}

func (c *ca) keyPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(c.key.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writePKI issues every certificate the components need into dir/pki, and a
// kubeconfig per client identity into dir.
//
//	ca            the cluster CA: serving and client certificates
//	front-proxy   the aggregation layer's CA: kube-apiserver's client
//	              certificate towards extension API servers (data.posture.dev)
//	sa.key        signs ServiceAccount tokens
func (c *Cluster) writePKI() error {
	pki := c.path("pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	clusterCA, err := newCA("posture-local-ca")
	if err != nil {
		return err
	}
	frontCA, err := newCA("posture-local-front-proxy-ca")
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": clusterCA.certPEM(), "front-proxy-ca.crt": frontCA.certPEM()}
	caKey, err := clusterCA.keyPEM()
	if err != nil {
		return err
	}
	files["ca.key"] = caKey
	issue := func(name string, ca *ca, l leaf) error {
		crt, key, err := ca.issue(l)
		if err != nil {
			return fmt.Errorf("issuing %s: %w", name, err)
		}
		files[name+".crt"], files[name+".key"] = crt, key
		return nil
	}
	nodeIP := net.ParseIP(c.State.NodeIP)
	if err := issue("apiserver", clusterCA, leaf{
		cn:     "kube-apiserver",
		server: true,
		dns:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		ips:    []net.IP{nodeIP, net.ParseIP(c.State.apiServiceIP()), net.ParseIP("127.0.0.1")},
	}); err != nil {
		return err
	}
	if err := issue("apiserver-kubelet-client", clusterCA, leaf{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}}); err != nil {
		return err
	}
	if err := issue("front-proxy-client", frontCA, leaf{cn: "front-proxy-client"}); err != nil {
		return err
	}
	if err := issue("kubelet", clusterCA, leaf{cn: "system:node:" + c.State.NodeName, server: true, ips: []net.IP{nodeIP}, dns: []string{c.State.NodeName}}); err != nil {
		return err
	}
	clients := []struct{ name, cn, org string }{
		{"admin", "posture-local-admin", "system:masters"},
		{"kubelet-client", "system:node:" + c.State.NodeName, "system:nodes"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"kube-proxy", "system:kube-proxy", ""},
	}
	for _, cl := range clients {
		l := leaf{cn: cl.cn}
		if cl.org != "" {
			l.orgs = []string{cl.org}
		}
		if err := issue(cl.name, clusterCA, l); err != nil {
			return err
		}
	}
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return err
		}
	}
	// Components inside the namespace reach kube-apiserver on the node IP;
	// the admin kubeconfig works from the host too, through the same address.
	server := "https://" + net.JoinHostPort(c.State.NodeIP, "6443")
	for _, cl := range clients {
		if err := writeKubeconfig(c.path(cl.name+".kubeconfig"), server, files["ca.crt"], files[cl.name+".crt"], files[cl.name+".key"]); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["posture-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["posture-local"] = &clientcmdapi.Context{Cluster: "posture-local", AuthInfo: "user"}
	cfg.CurrentContext = "posture-local"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
