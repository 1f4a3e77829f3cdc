package tasksemu

import "net/http"

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/.well-known/openid-configuration", s.issuer.Handler())
	mux.Handle("/jwks", s.issuer.Handler())
	return mux
}
