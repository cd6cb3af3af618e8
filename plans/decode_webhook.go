package plans

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A sink's webhook: mapping (Webhook, notify.go), read and checked like
// the rest of a sink (decode_notify.go).

// The keys a webhook may use.
var webhookKeys = []string{"url", "secret_env", "headers", "ca_file"}

// reservedHeaders are the headers a webhook request gets from migrate
// (Standard Webhooks' signature and id, the body's type, the client); a
// plan setting them would break the receiver's checks or lie about them.
var reservedHeaders = []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent"}

// webhook reads and checks a sink's webhook: mapping.
func (d *decoder) webhook(label string, sf *fields, n *yaml.Node) *Webhook {
	if n.Kind != yaml.MappingNode {
		d.probs.add(sf.tag("webhook"), d.at(n), "%swebhook must be a mapping (url:, and optionally secret_env:, headers:, ca_file:)", label)
		return nil
	}
	f := newFields(sf.prefix+"webhook.", d.at(n))
	w := &Webhook{}
	nodes := map[string]*yaml.Node{}
	d.mapping(n, "webhook", webhookKeys, func(key string, v *yaml.Node) { nodes[key] = v })

	if v := nodes["url"]; v != nil {
		d.str(f, "url", v, &w.URL)
	}
	if !f.bad["url"] {
		if strings.TrimSpace(w.URL) == "" {
			d.probs.add(f.tag("url"), f.where("url"), "%swebhook %s", label, f.missing("url"))
		} else if msg := checkWebhookURL(w.URL, f.raw["url"]); msg != "" {
			d.probs.add(f.tag("url"), f.where("url"), "%swebhook url %s", label, msg)
		}
	}
	if v := nodes["secret_env"]; v != nil {
		d.secretEnv(label, f, v, &w.SecretEnv)
	}
	if v := nodes["headers"]; v != nil {
		w.Headers = d.headers(label, f, v)
	}
	if v := nodes["ca_file"]; v != nil {
		d.str(f, "ca_file", v, &w.CAFile)
		if f.has("ca_file") && !f.bad["ca_file"] {
			if msg := checkCAFile(w.CAFile); msg != "" {
				d.probs.add(f.tag("ca_file"), f.where("ca_file"), "%sca_file %s %s", label, f.show("ca_file", w.CAFile), msg)
			}
		}
	}
	return w
}

// checkWebhookURL says what is wrong with a webhook's URL u, written as
// raw, or "". The URL is quoted without its user, query and fragment, and
// as written when ${VAR} expansion changed it.
func checkWebhookURL(u, raw string) string {
	shown := strconv.Quote(URLShown(u))
	if raw != "" && raw != u {
		shown = strconv.Quote(URLShown(raw)) + " (after expansion)"
	}
	parsed, err := url.Parse(u)
	if err != nil {
		// The parser's reason quotes a part of the URL: only of one
		// written in the file, and without a user, query or fragment.
		var ue *url.Error
		if raw == u && !strings.ContainsAny(u, "@?#") && errors.As(err, &ue) {
			return shown + " is not a URL: " + ue.Err.Error()
		}
		return shown + " is not a URL"
	}
	switch {
	case parsed.Scheme != "http" && parsed.Scheme != "https":
		return shown + " must be an http:// or https:// URL"
	case parsed.User != nil:
		return shown + " must not hold a user or password (it would be printed with the URL): send credentials in headers, e.g. Authorization: \"Bearer ${TOKEN}\""
	case parsed.Hostname() == "":
		return shown + " has no host"
	}
	return ""
}

// secretEnv reads secret_env: the name of the variable holding the signing
// secret. The name is not expanded (a ${VAR} there is the mistake of
// giving the secret itself), and the variable must be set: a plan about
// to be used cannot sign without it. Its value is never kept or shown.
func (d *decoder) secretEnv(label string, f *fields, n *yaml.Node, dst *string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		f.at["secret_env"], f.bad["secret_env"] = d.at(n), true
		hint := "NAME"
		if v, ok := strings.CutPrefix(n.Value, "${"); ok && strings.HasSuffix(v, "}") && validVarName(v[:len(v)-1]) {
			hint = v[:len(v)-1]
		}
		d.probs.add(f.tag("secret_env"), d.at(n), "%ssecret_env %q: give the name of the environment variable that holds the secret (secret_env: %s), not its value", label, n.Value, hint)
		return
	}
	d.str(f, "secret_env", n, dst)
	if !f.has("secret_env") || f.bad["secret_env"] {
		return
	}
	name := *dst
	at := f.where("secret_env")
	switch val, set := d.lookup(name); {
	case name == "":
		d.probs.add(f.tag("secret_env"), at, "%ssecret_env is empty; leave it out to send unsigned requests", label)
	case !validVarName(name):
		d.probs.add(f.tag("secret_env"), at, "%ssecret_env %s is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", label, f.show("secret_env", name))
	case !set:
		d.probs.add(f.tag("secret_env"), at, "%ssecret_env %s is not set in the environment", label, name)
	case val == "":
		d.probs.add(f.tag("secret_env"), at, "%ssecret_env %s is empty in the environment", label, name)
	}
}

// headers reads a webhook's headers: a mapping of header name to value,
// ${VAR} expanded. No message quotes a value, expanded or not: it is
// often a credential.
func (d *decoder) headers(label string, f *fields, n *yaml.Node) map[string]string {
	tag := f.tag("headers")
	f.at["headers"] = d.at(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.probs.add(tag, d.at(n), "%sheaders must map header names to values, e.g. {Authorization: \"Bearer ${TOKEN}\"}", label)
		return nil
	}
	out := map[string]string{}
	first := map[string]pos{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			d.probs.add(tag, d.at(k), "%sheader names must be plain words", label)
			continue
		}
		name := k.Value
		canon := http.CanonicalHeaderKey(name)
		switch at, dup := first[canon]; {
		case !validHeaderName(name):
			d.probs.add(tag, d.at(k), "%sheader name %q is not a valid HTTP header name", label, name)
			continue
		case slices.Contains(reservedHeaders, strings.ToLower(name)):
			d.probs.add(tag, d.at(k), "%sheader %s is set by migrate itself (%s)", label, name, strings.Join(reservedHeaders, ", "))
			continue
		case dup:
			d.probs.add(tag, d.at(k), "%sheader %s is given twice (first at %s)", label, name, at.place())
			continue
		}
		first[canon] = d.at(k)
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			d.probs.add(tag, d.at(v), "%sheader %s must have a single value", label, name)
			continue
		}
		val, ok := d.expand(tag, "header "+name, v)
		switch {
		case !ok:
			continue
		case val == "" && v.Value != "":
			d.probs.add(tag, d.at(v), "%sheader %s is empty after expansion", label, name)
			continue
		case !validHeaderValue(val):
			d.probs.add(tag, d.at(v), "%sheader %s: its value holds a line break or another control character", label, name)
			continue
		}
		out[name] = val
	}
	return out
}

// validHeaderName: an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r < 0x7f && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))) {
			return false
		}
	}
	return true
}

// validHeaderValue: no control characters but tab (RFC 9110 §5.5), which
// would end the header or be refused by the HTTP client.
func validHeaderValue(s string) bool {
	for _, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// checkCAFile says what is wrong with a webhook's CA file, or "": it must be
// a readable file of PEM certificates. A relative path is relative to the
// working directory, as the CA files of the DSNs are. The message never
// holds the path (it may be expanded): the caller quotes it as written.
func checkCAFile(name string) string {
	if name == "" {
		return "is empty; leave it out to trust the system's CAs"
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return "is a directory, not a PEM file"
	}
	data, err := os.ReadFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "cannot be read: " + err.Error()
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return "holds no PEM certificate"
	}
	return ""
}
