package gobgpv3

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// Listen binds every address of addrs (host:port) over TCP, or none: on an
// error the ones bound are closed and the error names the address.
func Listen(source string, addrs []string) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("[[source]] %q listen %q: %w (another GoBGP daemon on this port? stop it, or change the source's listen; FastNetMon dials localhost:50051)", source, a, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// TLSConfig is the listeners' mTLS: the server's certificate and key, and
// the CA every client's certificate must chain to.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls_cert %s / tls_key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("tls_client_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls_client_ca %s holds no PEM certificate", clientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
