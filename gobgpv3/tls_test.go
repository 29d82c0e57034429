package gobgpv3

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	apipb "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// issuer is a CA made for one test.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &issuer{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key in PEM.
func (ca *issuer) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// With mTLS, a client with a certificate from the client CA is served;
// one without a certificate, with another CA's, or in plain text is not.
func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "detectors"), newCA(t, "someone else")
	sc, sk := ca.issue(t, "ribkeeper", x509.ExtKeyUsageServerAuth)
	conf, err := TLSConfig(write(t, dir, "s.crt", sc), write(t, dir, "s.key", sk), write(t, dir, "ca.crt", ca.pem))
	if err != nil {
		t.Fatal(err)
	}
	k := &sink{}
	addr := serve(t, Config{Sink: k, TLS: conf})

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := func(certs ...tls.Certificate) apipb.GobgpApiClient {
		creds := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: certs, ServerName: "127.0.0.1"})
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return apipb.NewGobgpApiClient(cc)
	}
	pair := func(ca *issuer) tls.Certificate {
		c, k := ca.issue(t, "fastnetmon", x509.ExtKeyUsageClientAuth)
		kp, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	req := &apipb.AddPathRequest{Path: fnmPath(t, "10.10.10.10", false)}

	if _, err := client(pair(ca)).AddPath(ctx5s(t), req); err != nil {
		t.Fatalf("client with a certificate of the client CA: %v", err)
	}
	_, err = client().AddPath(ctx5s(t), req)
	wantCode(t, err, codes.Unavailable)
	_, err = client(pair(other)).AddPath(ctx5s(t), req)
	wantCode(t, err, codes.Unavailable)
	_, err = apipb.NewGobgpApiClient(dial(t, addr)).AddPath(ctx5s(t), req)
	wantCode(t, err, codes.Unavailable)
	if n := len(k.signals()); n != 1 {
		t.Errorf("sink got %d signals, want the one of the client with a good certificate", n)
	}
}

// TLSConfig names the file that is wrong.
func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "detectors")
	sc, sk := ca.issue(t, "ribkeeper", x509.ExtKeyUsageServerAuth)
	crt, key := write(t, dir, "s.crt", sc), write(t, dir, "s.key", sk)
	if _, err := TLSConfig(crt, key, filepath.Join(dir, "missing.crt")); err == nil {
		t.Error("a missing client CA was accepted")
	}
	if _, err := TLSConfig(crt, key, write(t, dir, "junk.crt", []byte("junk"))); err == nil {
		t.Error("a client CA without a certificate was accepted")
	}
	if _, err := TLSConfig(key, crt, write(t, dir, "ca.crt", ca.pem)); err == nil {
		t.Error("swapped certificate and key were accepted")
	}
}
