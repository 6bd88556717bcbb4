package config

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// DefaultCipherSuites are the TLS 1.2 suites offered when tls.cipher-suites is empty: ECDHE
// key exchange with AEAD ciphers only. Go's own default also offers CBC suites with SHA-1
// MACs (TLS_ECDHE_*_WITH_AES_*_CBC_SHA); every client Titan is tested with (python3-stomp
// over OpenSSL, Node's stompjs, PHP, Go) negotiates one of these (issue 29).
var DefaultCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSVersion returns the tls.VersionTLS1x of tls.min-version ("" is "1.2").
func TLSVersion(v string) (uint16, error) {
	switch v {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("tls.min-version %q is not supported (want 1.2 or 1.3)", v)
}

// CipherSuiteIDs returns the ids of tls.cipher-suites (DefaultCipherSuites when empty).
// Errors name every unknown or insecure suite.
func CipherSuiteIDs(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return DefaultCipherSuites, nil
	}
	known := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		known[cs.Name] = cs.ID
	}
	var ids []uint16
	var errs []error
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			errs = append(errs, fmt.Errorf("tls.cipher-suites: %q is not a secure cipher suite Go implements", n))
			continue
		}
		ids = append(ids, id)
	}
	return ids, errors.Join(errs...)
}

// CheckTLS returns the problems of t's min-version and cipher-suites, or nil.
func CheckTLS(t TLS) error {
	_, err1 := TLSVersion(t.MinVersion)
	_, err2 := CipherSuiteIDs(t.CipherSuites)
	return errors.Join(err1, err2)
}
