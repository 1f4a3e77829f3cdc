package tasksemu

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

// applyHTTPTarget applies a queue's http_target (URI override, method, header overrides and
// authorization) to an attempt. The stored task is not changed, as in production.
func applyHTTPTarget(a *attempt, ht *cloudtaskspb.HttpTarget, defaultEmail string) {
	if ht == nil {
		return
	}
	if uo := ht.GetUriOverride(); uo != nil {
		a.url = overrideURI(a.url, uo)
	}
	if m := ht.GetHttpMethod(); m != cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		a.method = m.String()
		if !bodyAllowed(m) {
			a.body = nil
		}
	}
	for _, ho := range ht.GetHeaderOverrides() {
		if h := ho.GetHeader(); h != nil && h.GetKey() != "" {
			if a.headers == nil {
				a.headers = map[string]string{}
			}
			for k := range a.headers {
				if strings.EqualFold(k, h.GetKey()) {
					delete(a.headers, k)
				}
			}
			a.headers[h.GetKey()] = h.GetValue()
		}
	}
	switch auth := ht.GetAuthorizationHeader().(type) {
	case *cloudtaskspb.HttpTarget_OidcToken:
		a.audience = auth.OidcToken.GetAudience()
		if a.audience == "" {
			a.audience = a.url
		}
		a.email = auth.OidcToken.GetServiceAccountEmail()
		if a.email == "" {
			a.email = defaultEmail
		}
	case *cloudtaskspb.HttpTarget_OauthToken:
		a.audience, a.email = "", "" // no access tokens in the emulator
	}
}

// overrideURI rewrites raw with a queue's uri_override. In IF_NOT_EXISTS mode only the parts
// the task's URL lacks (port, path, query) are filled in.
func overrideURI(raw string, uo *cloudtaskspb.UriOverride) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	always := uo.GetUriOverrideEnforceMode() != cloudtaskspb.UriOverride_IF_NOT_EXISTS
	if uo.Scheme != nil && always {
		if uo.GetScheme() == cloudtaskspb.UriOverride_HTTP {
			u.Scheme = "http"
		} else {
			u.Scheme = "https"
		}
	}
	host, port := u.Hostname(), u.Port()
	if uo.Host != nil && always && uo.GetHost() != "" {
		host = uo.GetHost()
	}
	if uo.Port != nil && (always || port == "") {
		port = ""
		if uo.GetPort() > 0 {
			port = strconv.FormatInt(uo.GetPort(), 10)
		}
	}
	u.Host = host
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	} else if net.ParseIP(host) != nil && net.ParseIP(host).To4() == nil {
		u.Host = "[" + host + "]"
	}
	if po := uo.GetPathOverride(); po != nil && (always || u.Path == "" || u.Path == "/") {
		u.Path, u.RawPath = po.GetPath(), ""
	}
	if qo := uo.GetQueryOverride(); qo != nil && (always || u.RawQuery == "") {
		u.RawQuery = qo.GetQueryParams()
	}
	return u.String()
}
