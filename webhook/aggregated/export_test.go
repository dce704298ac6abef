package aggregated

import "net/http"

// Handler is the server's whole handler chain, for tests that call it
// without serving.
func (s *Server) Handler() http.Handler { return s.generic.Handler }
