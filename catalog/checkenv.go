package catalog

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// envStandIn is what LoadWithoutEnv reads for an unset variable: one value
// every *_env field accepts (an upstream key, an inbound token, a secret,
// a header=value pair), so the rest of the config is still checked.
const envStandIn = "toolgate-check=unset"

// LoadWithoutEnv is Load for checking a config where its secrets are not
// set, such as a laptop or a CI job: a variable that a *_env field names
// and that is unset or blank is listed in unset (sorted, once each) instead
// of failing the load. The Snapshot holds stand-in values for them and is
// for inspection only, never for serving.
func LoadWithoutEnv(path string) (s *Snapshot, unset []string, err error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	missing := map[string]bool{}
	s, err = compile(c, filepath.Dir(path), func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
			return v, true
		}
		missing[name] = true
		return envStandIn, true
	})
	if err != nil {
		return nil, nil, err
	}
	for name := range missing {
		unset = append(unset, name)
	}
	sort.Strings(unset)
	return s, unset, nil
}
