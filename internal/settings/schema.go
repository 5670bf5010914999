package settings

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// crdYAML is the WaitingQueue CRD as controller-gen generates it (config/crd/bases), copied here by
// hack/sync-chart.sh; make verify fails when the copy is not current.
//
//go:embed waitingqueues.herdgate.io.yaml
var crdYAML []byte

// The schema check: the WaitingQueue CRD's own schema and CEL rules, run with the API server's own
// code (k8s.io/apiextensions-apiserver) in the manager and in every proxy. A spec the API server would
// refuse is refused here with the same message, field by field, and Derive's own checks (which the
// CEL rules mirror) come after it; so what the API server accepts and what the proxy serves cannot
// drift apart, whichever field a later version adds.
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaCreateValidator
	cel        *cel.Validator
}

var (
	schemaOnce   sync.Once
	loadedSchema *crdSchema
	schemaErr    error
)

func loadSchema() (*crdSchema, error) {
	schemaOnce.Do(func() {
		loadedSchema, schemaErr = parseSchema(crdYAML)
	})
	return loadedSchema, schemaErr
}

func parseSchema(raw []byte) (*crdSchema, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("reading the WaitingQueue CRD: %w", err)
	}
	var v1Schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == herdgatev1alpha1.GroupVersion.Version && v.Schema != nil {
			v1Schema = v.Schema.OpenAPIV3Schema
		}
	}
	if v1Schema == nil {
		return nil, fmt.Errorf("the WaitingQueue CRD has no schema of version %s", herdgatev1alpha1.GroupVersion.Version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the WaitingQueue schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the WaitingQueue schema is not structural: %w", err)
	}
	openAPI, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("compiling the WaitingQueue schema: %w", err)
	}
	return &crdSchema{structural: structural, openAPI: openAPI, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
}

// checkSchema validates wq as the API server validates a WaitingQueue it is sent (as Go writes it).
func checkSchema(wq *herdgatev1alpha1.WaitingQueue) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wq)
	if err != nil {
		return fmt.Errorf("converting the WaitingQueue: %w", err)
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp") // written as null by Go for a queue not read from the API
	}
	return ValidateObject(obj)
}

// ValidateObject validates a WaitingQueue object as the API server validates one it is sent: nulls
// where the schema takes none dropped and defaults filled in (into obj), then the OpenAPI schema, list
// types and the CEL rules. It returns the first error, naming its field. obj holds what JSON decodes
// into (numbers as int64 or float64, as k8s.io/apimachinery/pkg/util/json gives them): a spec written
// by hand, such as the proxy's config file, meets it before Go's decoder, which names no field.
func ValidateObject(obj map[string]any) error {
	s, err := loadSchema()
	if err != nil {
		return err
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s.structural)
	structuraldefaulting.Default(obj, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, s.openAPI)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	if !blocksRules(errs) {
		celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) == 0 {
		return nil
	}
	first := errs[0]
	for _, e := range errs { // the first error of spec, which is what a user writes
		if strings.HasPrefix(e.Field, "spec") {
			first = e
			break
		}
	}
	return &FieldError{Field: first.Field, Detail: first.ErrorBody()}
}

// blocksRules: as the API server does, CEL rules are not run on an object the schema found of the
// wrong type or shape.
func blocksRules(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}
