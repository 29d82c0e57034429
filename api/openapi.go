package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3 document of every /v1 route
// (openapi.json). A test checks it against the routes the code registers
// (every one documented, every documented one served), its examples
// against its schemas, and live answers against them: a route or field
// added without documentation fails it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPIPath is where the document is served. It is public on the TCP
// listener (no token): it describes the API as the README does, and says
// nothing of the rules, peers or tokens of this daemon.
const OpenAPIPath = "/v1/openapi.json"

// OpenAPI returns the OpenAPI document (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(openAPIDoc)
}

// public reports whether r may be served without a token: the OpenAPI
// document.
func public(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == OpenAPIPath
}
