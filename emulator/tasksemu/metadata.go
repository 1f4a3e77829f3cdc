package tasksemu

import (
	"io"
	"net/http"
	"time"
)

// The emulator also answers the metadata server's service-account endpoints that
// cloud.google.com/go/compute/metadata calls for ID tokens. On Cloud Run a service gets the
// token it sends to another service from the metadata server; pointing GCE_METADATA_HOST at the
// HTTP port makes the same code get one signed by the key that receivers already verify the
// dispatcher's tokens with.

// serveIdentity answers GET /computeMetadata/v1/instance/service-accounts/{account}/identity: an
// ID token for the audience query parameter with the account's e-mail. format (full or
// standard) and licenses are accepted and ignored: the token always carries email and
// email_verified, as a format=full token does.
func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request) {
	if !metadataRequest(w, r) {
		return
	}
	audience := r.URL.Query().Get("audience")
	if audience == "" {
		http.Error(w, "non-empty audience parameter required", http.StatusBadRequest)
		return
	}
	tok, err := s.issuer.Token(audience, s.serviceAccountEmail(r.PathValue("account")), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, tok)
}

// serveEmail answers GET /computeMetadata/v1/instance/service-accounts/{account}/email.
func (s *Server) serveEmail(w http.ResponseWriter, r *http.Request) {
	if !metadataRequest(w, r) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, s.serviceAccountEmail(r.PathValue("account")))
}

// serviceAccountEmail maps the account segment of a metadata path to an e-mail: "default" is
// the instance's own account (Options.ServiceAccount), anything else names an account by its
// e-mail.
func (s *Server) serviceAccountEmail(account string) string {
	if account == "default" {
		return s.opts.ServiceAccount
	}
	return account
}

// metadataRequest sets the Metadata-Flavor response header, which clients check to tell the
// metadata server from whatever else answers on its address, and rejects a request without the
// Metadata-Flavor request header with 403, as the metadata server does. That header is its
// defence against a redirected or forged request (server-side request forgery); without the
// same check here, a client that forgot it would work locally and fail on Cloud Run.
func metadataRequest(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, `Missing required header "Metadata-Flavor": "Google"`, http.StatusForbidden)
		return false
	}
	return true
}
