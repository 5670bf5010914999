package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/herdgate/herdgate/admission"
)

// contract is the check TestMain runs; serveFront tells it where proxies listen.
var contract *contractCheck

// plainTransport is the transport the package's clients had: TestMain puts contractTransport in
// front of it as http.DefaultTransport.
var plainTransport = http.DefaultTransport.(*http.Transport)

// TestMain checks every answer this package's tests receive from /.herdgate/ against the OpenAPI
// document the proxy serves (admission/openapi.json): the document cannot drift from what the proxy
// answers without a test failing. Answers to raw requests (harness.raw) are not checked.
func TestMain(m *testing.M) {
	var err error
	contract, err = newContractCheck(admission.OpenAPIDocument())
	if err != nil {
		fmt.Fprintln(os.Stderr, "the OpenAPI document:", err)
		os.Exit(1)
	}
	http.DefaultTransport = contract
	// The waiting page's HTML is read as the text it is.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	code := m.Run()
	if broken := contract.violations(); len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "%d answers under /.herdgate/ do not match admission/openapi.json:\n", len(broken))
		for _, v := range broken {
			fmt.Fprintln(os.Stderr, "  "+v)
		}
		code = 1
	} else {
		fmt.Fprintf(os.Stderr, "contract: %d answers under /.herdgate/ matched admission/openapi.json\n", contract.checked())
	}
	os.Exit(code)
}

// contractCheck validates the answers under /.herdgate/ that pass through it.
type contractCheck struct {
	doc    *openapi3.T
	router routers.Router
	errors *openapi3.Schema

	mu     sync.Mutex
	broken []string
	count  int
	// proxies are the addresses the tests' proxies listen on (serveFront): answers of others, such
	// as a gateway in front of a proxy, are not the proxy's.
	proxies map[string]bool
}

// serving registers the address a proxy of the tests listens on.
func (c *contractCheck) serving(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proxies[addr] = true
}

// stopped forgets a proxy's address once it stops listening: another server of a later test (a
// gateway still loading its routes, say) may get the same port, and its answers are not the proxy's.
func (c *contractCheck) stopped(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.proxies, addr)
}

func (c *contractCheck) isProxy(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxies[addr]
}

func newContractCheck(raw []byte) (*contractCheck, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contractCheck{doc: doc, router: router, errors: doc.Components.Schemas["Error"].Value, proxies: map[string]bool{}}, nil
}

func (c *contractCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := plainTransport.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/.herdgate") || !c.isProxy(req.URL.Host) {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if problem := c.check(req, res, body); problem != "" {
		c.mu.Lock()
		c.broken = append(c.broken, fmt.Sprintf("%s %s → %d %.160q: %s", req.Method, req.URL.Path, res.StatusCode, bytes.TrimSpace(body), problem))
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.count++
	c.mu.Unlock()
	return res, nil
}

// check says what is wrong with res, or "".
func (c *contractCheck) check(req *http.Request, res *http.Response, body []byte) string {
	route, params, err := c.router.FindRoute(req)
	var routeErr *routers.RouteError
	if errors.As(err, &routeErr) && routeErr.Reason == routers.ErrMethodNotAllowed.Error() && res.StatusCode != http.StatusMethodNotAllowed {
		// healthz and readyz answer any method as GET.
		get := req.Clone(req.Context())
		get.Method = http.MethodGet
		route, params, err = c.router.FindRoute(get)
		req = get
	}
	if err != nil {
		// An endpoint the proxy does not have, or a method it does not take (the Envoy form of the
		// check, /.herdgate/check/<path>, answers as the check does): an error answer.
		return c.checkError(res, body)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: req.Method == http.MethodHead,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()}},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		return err.Error()
	}
	return ""
}

func (c *contractCheck) checkError(res *http.Response, body []byte) string {
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || len(body) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "not JSON: " + err.Error()
	}
	if err := c.errors.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return "not an Error: " + err.Error()
	}
	return ""
}

func (c *contractCheck) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.broken...)
}

func (c *contractCheck) checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// TestTheProxyServesItsOpenAPIDocument: /.herdgate/openapi.json is the document the tests hold the
// answers to, and it is OpenAPI 3.1.
func TestTheProxyServesItsOpenAPIDocument(t *testing.T) {
	h := newMemoryHarness(t, nil)
	r := h.visitor().do(http.MethodGet, "/.herdgate/openapi.json", nil)
	if r.StatusCode != http.StatusOK || !bytes.Equal(r.body, admission.OpenAPIDocument()) {
		t.Fatalf("GET /.herdgate/openapi.json: %d, %d bytes; want 200 and the document", r.StatusCode, len(r.body))
	}
	if body := r.json(t); body["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v, want 3.1.0", body["openapi"])
	}
}
