package schedhttp

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
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
	mux := h.mux()
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		req := httptest.NewRequest(method, param.ReplaceAllString(path, "x"), nil)
		_, pattern := mux.Handler(req)
		require.Equal(t, op, strings.Replace(pattern, "/{$}", "/", 1), "the mux serves %s", op)
	}
}

// Every schema of the document has the properties of its wire type's
// JSON fields, no more, no fewer, and lists as required exactly the
// fields that are never omitted.
func TestOpenAPISchemasMatchTheWireTypes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	types := map[string]any{
		"Job": JobJSON{}, "JobsPage": JobsPage{}, "Attempt": AttemptJSON{}, "Run": RunJSON{}, "RunsPage": RunsPage{},
		"Slot": SlotJSON{}, "SlotResponse": SlotResponse{}, "SlotsResponse": SlotsResponse{}, "PausedResponse": PausedResponse{},
		"Lease": LeaseJSON{}, "LeasesPage": LeasesPage{}, "RetryRequest": RetryRequest{}, "TriggerRequest": TriggerRequest{},
		"BackfillRequest": BackfillRequest{}, "ResumeRequest": ResumeRequest{}, "Problem": Problem{},
	}
	require.Len(t, doc.Components.Schemas, len(types), "a schema per wire type")
	for name, v := range types {
		schema, ok := doc.Components.Schemas[name]
		require.True(t, ok, name)
		var props, always []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag := rt.Field(i).Tag.Get("json")
			field, opts, _ := strings.Cut(tag, ",")
			props = append(props, field)
			if !strings.Contains(opts, "omit") {
				always = append(always, field)
			}
		}
		var documented []string
		for p := range schema.Properties {
			documented = append(documented, p)
		}
		slices.Sort(props)
		slices.Sort(documented)
		require.Equal(t, props, documented, "properties of %s", name)
		if strings.HasSuffix(name, "Request") {
			continue // a request's required fields are what the handler checks
		}
		slices.Sort(always)
		required := slices.Sorted(slices.Values(schema.Required))
		require.Equal(t, always, required, "required of %s", name)
	}
}
