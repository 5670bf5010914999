package admission

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/settings"
)

// FileConfig is the proxy's config file: the WaitingQueue as it would be applied, the Redis URL and
// the HMAC key, for running the proxy outside Kubernetes.
type FileConfig struct {
	// WaitingQueue is the room the proxy serves.
	WaitingQueue herdgatev1alpha1.WaitingQueue `json:"waitingQueue"`
	// RedisURL is the Redis holding the queue.
	RedisURL string `json:"redisURL"`
	// HMACKey is the base64 key (at least 32 bytes) that signs passes; the scheduler does not need it.
	HMACKey string `json:"hmacKey"`
	// Secrets are the values the room's fields refer to (spec.entry.invitation.keySecretRef and
	// the like), by Secret name and key, as in a Secret's stringData.
	Secrets map[string]map[string]string `json:"secrets,omitempty"`
	// ConfigMaps are the ConfigMap values the room's fields refer to (spec.page.template), by
	// ConfigMap name and key.
	ConfigMaps map[string]map[string]string `json:"configMaps,omitempty"`
	// PassKeys are the keys of JWT passes (spec.pass.format JWT) as the operator keeps them in the
	// room's Secret; they do not rotate in a file.
	PassKeys string `json:"passKeys,omitempty"`
}

// values reads the file's Secrets as the proxy reads its mount.
func (fc *FileConfig) values() SecretValues {
	byKey := map[string][]byte{}
	for name, keys := range fc.Secrets {
		for key, v := range keys {
			byKey[herdgatev1alpha1.SecretRefKey(name, key)] = []byte(v)
		}
	}
	for name, keys := range fc.ConfigMaps {
		for key, v := range keys {
			byKey[herdgatev1alpha1.ConfigMapRefKey(name, key)] = []byte(v)
		}
	}
	if fc.PassKeys != "" {
		byKey[herdgatev1alpha1.SecretPassKeys] = []byte(fc.PassKeys)
	}
	return func(key string) ([]byte, error) {
		v, ok := byKey[key]
		if !ok {
			return nil, errors.New("not in the config file's secrets")
		}
		return v, nil
	}
}

// checkPassKeys says what is wrong with the file's passKeys for its room's passes, naming the
// field: the Secret the operator keeps them in does not exist here.
func (fc *FileConfig) checkPassKeys() error {
	spec := &fc.WaitingQueue.Spec
	if spec.EffectivePassFormat() != herdgatev1alpha1.PassFormatJWT {
		if fc.PassKeys != "" {
			return errors.New("passKeys: set, but the queue's passes are not JWT (spec.pass.format)")
		}
		return nil
	}
	alg := spec.EffectivePassAlgorithm()
	if fc.PassKeys == "" {
		return fmt.Errorf("passKeys: required for JWT passes (spec.pass.format); herdgate-proxy --generate-pass-keys=%s prints the line", alg)
	}
	keys, err := pass.ParseKeySet([]byte(fc.PassKeys))
	if err != nil {
		return fmt.Errorf("passKeys: %w", err)
	}
	signing := keys.Signing(time.Now())
	switch {
	case signing == nil:
		return errors.New("passKeys: no key signs yet (every activeFrom is in the future)")
	case string(signing.Algorithm) != string(alg):
		return fmt.Errorf("passKeys: the signing key is %s, and spec.pass.algorithm is %s", signing.Algorithm, alg)
	}
	return nil
}

// LoadFile reads and checks a config file. Errors name the file and the field.
func LoadFile(path string) (*Config, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	// The room first meets the checks the API server would run on it, which name the field at fault;
	// Go's decoder, next, names none (a time it cannot parse, a duration it cannot read).
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	var doc struct {
		WaitingQueue map[string]any `json:"waitingQueue"`
	}
	if err := utiljson.Unmarshal(asJSON, &doc); err == nil && doc.WaitingQueue != nil {
		if err := settings.ValidateObject(doc.WaitingQueue); err != nil {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
	}
	fc := FileConfig{}
	if err := yaml.UnmarshalStrict(raw, &fc); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if fc.RedisURL == "" {
		return nil, "", fmt.Errorf("%s: redisURL: required", path)
	}
	key, err := base64.StdEncoding.DecodeString(fc.HMACKey)
	if err != nil {
		return nil, "", fmt.Errorf("%s: hmacKey: not base64: %w", path, err)
	}
	if len(key) < 32 {
		return nil, "", fmt.Errorf("%s: hmacKey: %d bytes, at least 32 required", path, len(key))
	}
	if err := fc.checkPassKeys(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := NewConfigWithSecrets(&fc.WaitingQueue, key, fc.values())
	if err != nil {
		if errors.As(err, new(*settings.FieldError)) {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, fc.RedisURL, nil
}
