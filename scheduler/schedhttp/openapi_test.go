package schedhttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The OpenAPI document names every route the mux serves, and the mux
// serves every operation the document names, with the same pattern.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	var served []string
	h := &adminHandler{}
	for _, rt := range h.routes() {
		served = append(served, strings.Replace(rt.pattern, "/{$}", "/", 1))
	}
	slices.Sort(documented)
	slices.Sort(served)
	require.Equal(t, served, documented)

	// Each documented operation reaches the mux pattern of its route.
	mux, ok := New(nil, Config{}).(*http.ServeMux)
	require.True(t, ok)
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		req := httptest.NewRequest(method, param.ReplaceAllString(path, "x"), nil)
		_, pattern := mux.Handler(req)
		require.Equal(t, op, strings.Replace(pattern, "/{$}", "/", 1), "the mux serves %s", op)
	}
}
