package auth

import (
	"crypto/x509"
	"fmt"
	"net"
	"strings"
)

// Certificate identities (issue #29): a users-file entry says which identity of a verified
// client certificate logs in as the user, typed by a prefix. Nothing maps implicitly: a
// certificate whose CN or SAN merely equals a user name is not that user, and without any
// `certificates` entry in the file certificate login is off (a certificate then only
// authenticates the TLS channel, and CONNECT logs in with login and passcode as usual).
// RabbitMQ's rabbit_auth_mechanism_ssl chooses one field broker-wide (ssl_cert_login_from:
// distinguished_name, common_name or subject_alternative_name with ssl_cert_login_san_type);
// Artemis's TextFileCertificateLoginModule maps subject DNs. Titan names the field per entry.
const (
	// CertDN matches the subject distinguished name in RFC 2253 form, as Go's
	// pkix.Name.String and `openssl x509 -noout -subject -nameopt RFC2253` print it
	// ("dn:CN=app1.example.com,O=Example").
	CertDN = "dn"
	// CertCN matches the subject common name ("cn:app1.example.com").
	CertCN = "cn"
	// CertDNS matches a DNS-name SAN ("dns:app1.example.com").
	CertDNS = "dns"
	// CertEmail matches an e-mail SAN ("email:app1@example.com").
	CertEmail = "email"
	// CertURI matches a URI SAN ("uri:spiffe://example.com/app1").
	CertURI = "uri"
	// CertIP matches an IP-address SAN ("ip:10.0.0.7").
	CertIP = "ip"
)

var certKinds = []string{CertDN, CertCN, CertDNS, CertEmail, CertURI, CertIP}

// parseCertIdentity splits a users-file certificate entry into its kind and value. Errors
// name the entry and the accepted kinds.
func parseCertIdentity(entry string) (kind, value string, err error) {
	kind, value, ok := strings.Cut(entry, ":")
	if ok {
		for _, k := range certKinds {
			if strings.EqualFold(kind, k) && value != "" {
				return k, value, nil
			}
		}
	}
	return "", "", fmt.Errorf("certificate identity %q must name its field: dn:SUBJECT-DN, cn:COMMON-NAME, dns:NAME, email:ADDRESS, uri:URI or ip:ADDRESS (an untyped name no longer maps to a CN or any SAN)", entry)
}

// certKey is the lookup key of one certificate identity.
func certKey(kind, value string) string {
	if kind == CertIP {
		if ip := net.ParseIP(value); ip != nil {
			value = ip.String()
		}
	}
	if kind == CertDNS || kind == CertEmail {
		value = strings.ToLower(value) // DNS names and e-mail domains compare without case
	}
	return kind + ":" + value
}

// certIdentities returns the lookup keys of every identity a verified leaf certificate
// carries.
func certIdentities(cert *x509.Certificate) []string {
	keys := make([]string, 0, 2+len(cert.DNSNames)+len(cert.EmailAddresses)+len(cert.URIs)+len(cert.IPAddresses))
	keys = append(keys, certKey(CertDN, cert.Subject.String()))
	if cert.Subject.CommonName != "" {
		keys = append(keys, certKey(CertCN, cert.Subject.CommonName))
	}
	for _, n := range cert.DNSNames {
		keys = append(keys, certKey(CertDNS, n))
	}
	for _, n := range cert.EmailAddresses {
		keys = append(keys, certKey(CertEmail, n))
	}
	for _, u := range cert.URIs {
		keys = append(keys, certKey(CertURI, u.String()))
	}
	for _, ip := range cert.IPAddresses {
		keys = append(keys, certKey(CertIP, ip.String()))
	}
	return keys
}
