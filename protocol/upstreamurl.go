package protocol

import (
	"fmt"
	"net/url"
)

// UpstreamURL checks a backend's upstream address option: present, and
// an http or https URL with a host. option names it in errors, and what
// (may be empty) says what it should be when it is missing.
func UpstreamURL(option, raw, what string) (*url.URL, error) {
	if raw == "" {
		if what != "" {
			return nil, fmt.Errorf("%s: required (%s)", option, what)
		}
		return nil, fmt.Errorf("%s: required", option)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: %q is not an http(s) URL with a host", option, raw)
	}
	return u, nil
}
