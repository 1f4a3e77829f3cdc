package adminclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/spanmart/spanmart/pkg/platform"
)

// Tokens mints the Google ID tokens sent to the services: audience is the called service's base
// URL (Config.URLs). *platform.IDTokenSource implements it.
type Tokens interface {
	Token(ctx context.Context, audience string) (string, error)
}

// MetadataOptions configures NewMetadataTokens.
type MetadataOptions struct {
	// Account is the service account whose tokens are asked for (its e-mail); "" is the metadata
	// server's default account. On Cloud Run the metadata server knows only the service's own
	// account; the dev stack's Tasks emulator mints a token for any account, e.g.
	// localcloud.Operator.
	Account string
	// Host is the metadata server to ask, host:port (an http:// prefix is allowed), e.g. the dev
	// stack's Tasks emulator at 127.0.0.1:8124; "" asks the one the metadata client finds
	// (GCE_METADATA_HOST, else 169.254.169.254).
	Host string
	// Timeout bounds one token request; 0 means 10 s.
	Timeout time.Duration
}

// NewMetadataTokens returns the metadata server's ID tokens, cached per audience until five
// minutes before they expire (platform.IDTokenSource). It is the source to prefer: each service
// gets a token for its own URL.
func NewMetadataTokens(opts MetadataOptions) *platform.IDTokenSource {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var transport http.RoundTripper = http.DefaultTransport
	if host := strings.TrimSuffix(strings.TrimPrefix(opts.Host, "http://"), "/"); host != "" {
		transport = hostTransport{host: host, base: http.DefaultTransport}
	}
	return platform.NewIDTokenSource(&http.Client{Timeout: timeout, Transport: transport}, platform.WithServiceAccount(opts.Account))
}

// hostTransport sends every request to host: the metadata client builds its URLs from
// GCE_METADATA_HOST, which is the process's environment, and a tool pointed at a dev stack must
// not depend on (or change) it.
type hostTransport struct {
	host string
	base http.RoundTripper
}

func (t hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = t.host, t.host
	return t.base.RoundTrip(req)
}

// FixedToken is one ID token used for every request, whatever the audience: the output of
// `gcloud auth print-identity-token --audiences=URL` a person pasted. A Google ID token has one
// audience and the services check it, so a fixed token suits a Client that calls one service only
// (or a test issuer that ignores audiences); it also expires within the hour. Prefer
// NewMetadataTokens, which mints a token for each service.
type FixedToken string

// Token returns the token; audience is ignored.
func (t FixedToken) Token(context.Context, string) (string, error) {
	tok := strings.TrimSpace(string(t))
	if tok == "" {
		return "", errors.New("adminclient: the fixed token is empty")
	}
	return strings.TrimPrefix(tok, "Bearer "), nil
}
