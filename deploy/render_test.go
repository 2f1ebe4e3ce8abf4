package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/catalog"
)

// TestKubectlKustomizeShared renders the shared overlay with kubectl's own
// kustomize, as `kubectl apply -k` would, and finds the approvals wiring in
// what it prints: the redis store in the config, the admin token from a
// Secret, and the NetworkPolicies of the proxy and of the store.
func TestKubectlKustomizeShared(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kubectl not found")
		}
		t.Skip("kubectl not found")
	}
	var stderr bytes.Buffer
	// Some kubectl builds (the Cloud SDK's dispatcher) ask the cluster for
	// its version first, and with no kubeconfig that is localhost:8080,
	// where a toolgate may be running: point it at a port nothing holds.
	cmd := exec.Command(kubectl, "--server=http://"+freeAddr(t), "kustomize", sharedDir)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", sharedDir, err, stderr.String())
	}
	kinds := map[string][]byte{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := sigsyaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("kubectl kustomize printed YAML that does not parse: %v\n%s", err, doc)
		}
		kinds[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}

	var cm corev1.ConfigMap
	if err := sigsyaml.UnmarshalStrict(kinds["ConfigMap/"+configMapName], &cm); err != nil {
		t.Fatalf("ConfigMap %s: %v", configMapName, err)
	}
	cfg, err := catalog.Parse([]byte(cm.Data[configKey]), "rendered/"+configKey)
	if err != nil {
		t.Fatalf("rendered config: %v", err)
	}
	if !strings.HasPrefix(cfg.Approvals.Store, "redis://toolgate-redis:") {
		t.Errorf("approvals.store %q, want the toolgate-redis Service", cfg.Approvals.Store)
	}
	if _, ok := kinds["Service/toolgate-redis"]; !ok {
		t.Error("no Service toolgate-redis")
	}
	var redis appsv1.StatefulSet
	if err := sigsyaml.UnmarshalStrict(kinds["StatefulSet/toolgate-redis"], &redis); err != nil {
		t.Errorf("StatefulSet toolgate-redis: %v", err)
	} else if img := redis.Spec.Template.Spec.Containers[0].Image; img != "docker.io/library/redis:7.4" {
		t.Errorf("redis image %q", img)
	}

	var d appsv1.Deployment
	if err := sigsyaml.UnmarshalStrict(kinds["Deployment/toolgate"], &d); err != nil {
		t.Fatalf("Deployment toolgate: %v", err)
	}
	if cfg.Approvals.AdminTokenEnv == "" {
		t.Fatal("approvals.admin_token_env is empty")
	}
	var ref *corev1.SecretKeySelector
	for _, ev := range d.Spec.Template.Spec.Containers[0].Env {
		if ev.Name == cfg.Approvals.AdminTokenEnv && ev.ValueFrom != nil {
			ref = ev.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Name != "toolgate-admin" || ref.Key == "" {
		t.Errorf("$%s is not read from the toolgate-admin Secret: %+v", cfg.Approvals.AdminTokenEnv, ref)
	}

	for _, name := range []string{"toolgate", "toolgate-redis"} {
		var np networkingv1.NetworkPolicy
		if err := sigsyaml.UnmarshalStrict(kinds["NetworkPolicy/"+name], &np); err != nil {
			t.Errorf("NetworkPolicy %s: %v", name, err)
		}
	}
	// The Service agents use carries the proxy port only.
	var svc corev1.Service
	if err := sigsyaml.UnmarshalStrict(kinds["Service/toolgate"], &svc); err != nil {
		t.Fatal(err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == adminPort || p.TargetPort.String() == "admin" {
			t.Errorf("Service toolgate exposes the admin port: %+v", p)
		}
	}
}
