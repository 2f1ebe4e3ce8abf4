// Package deploy_test checks what ships in deploy/ and the Dockerfile: the
// kustomizations build and decode strictly into the Kubernetes API types,
// the sidecar and shared wiring agree with toolgate's own config rules, the
// image is built the way `make build` builds the binary, and the Prometheus
// rules pass promtool. It lives in its own module so that kustomize, the
// Kubernetes types and buildkit never enter toolgate's go.mod.
package deploy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/catalog"
)

const (
	baseDir   = "kubernetes/base"
	sharedDir = "kubernetes/overlays/shared"

	configMapName = "toolgate-config"
	configKey     = "config.yaml"
	configMount   = "/etc/toolgate"
	adminPort     = 9091
	proxyPort     = 8080
	nonRootUID    = 65532
)

// objects is one kustomization's output, each object decoded into its type.
type objects struct {
	deployments     map[string]*appsv1.Deployment
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs            map[string]*policyv1.PodDisruptionBudget
	networkPolicies map[string]*networkingv1.NetworkPolicy
	serviceMonitors map[string]*serviceMonitor
	prometheusRules map[string]*prometheusRule
}

// serviceMonitor and prometheusRule are the Prometheus Operator fields these
// manifests use. Decoding is strict, so a misspelt or unexpected field fails
// here instead of being dropped by the API server.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            ruleFile          `json:"spec"`
}

// ruleFile is a Prometheus rule file, and a PrometheusRule's spec.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Record      string            `json:"record,omitempty"`
			Alert       string            `json:"alert,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// kinds maps apiVersion/kind to a decoder into the matching map. A kind
// missing here fails the build test, so a new resource gets checked too.
func (o *objects) decoder(apiVersion, kind string) (func(name string, data []byte) error, bool) {
	into := func(m any, newObj func() any) func(string, []byte) error {
		return func(name string, data []byte) error {
			obj := newObj()
			if err := strictYAML(data, obj); err != nil {
				return err
			}
			reflect.ValueOf(m).SetMapIndex(reflect.ValueOf(name), reflect.ValueOf(obj))
			return nil
		}
	}
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return into(o.deployments, func() any { return new(appsv1.Deployment) }), true
	case "apps/v1/StatefulSet":
		return into(o.statefulSets, func() any { return new(appsv1.StatefulSet) }), true
	case "v1/Service":
		return into(o.services, func() any { return new(corev1.Service) }), true
	case "v1/ConfigMap":
		return into(o.configMaps, func() any { return new(corev1.ConfigMap) }), true
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return into(o.hpas, func() any { return new(autoscalingv2.HorizontalPodAutoscaler) }), true
	case "policy/v1/PodDisruptionBudget":
		return into(o.pdbs, func() any { return new(policyv1.PodDisruptionBudget) }), true
	case "networking.k8s.io/v1/NetworkPolicy":
		return into(o.networkPolicies, func() any { return new(networkingv1.NetworkPolicy) }), true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return into(o.serviceMonitors, func() any { return new(serviceMonitor) }), true
	case "monitoring.coreos.com/v1/PrometheusRule":
		return into(o.prometheusRules, func() any { return new(prometheusRule) }), true
	}
	return nil, false
}

// strictYAML decodes YAML into v and fails on any field v's type lacks and
// on duplicate keys.
func strictYAML(data []byte, v any) error {
	return sigsyaml.UnmarshalStrict(data, v)
}

// build runs kustomize on dir, as `kubectl apply -k` would, and decodes
// every object it yields.
func build(t *testing.T, dir string) *objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	o := &objects{
		deployments:     map[string]*appsv1.Deployment{},
		statefulSets:    map[string]*appsv1.StatefulSet{},
		services:        map[string]*corev1.Service{},
		configMaps:      map[string]*corev1.ConfigMap{},
		hpas:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		serviceMonitors: map[string]*serviceMonitor{},
		prometheusRules: map[string]*prometheusRule{},
	}
	if len(m.Resources()) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	for _, r := range m.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s/%s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		dec, ok := o.decoder(r.GetApiVersion(), r.GetKind())
		if !ok {
			t.Errorf("%s: %s %s/%s: no decoder for this kind; add one to objects.decoder", dir, r.GetApiVersion(), r.GetKind(), r.GetName())
			continue
		}
		if err := dec(r.GetName(), data); err != nil {
			t.Errorf("%s: %s/%s does not decode strictly into its API type: %v", dir, r.GetKind(), r.GetName(), err)
		}
		if l := r.GetLabels()["app.kubernetes.io/part-of"]; l != "toolgate" {
			t.Errorf("%s: %s/%s: label app.kubernetes.io/part-of = %q, want toolgate", dir, r.GetKind(), r.GetName(), l)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return o
}

// deployedConfig is the toolgate config a kustomization ships, checked the
// way `toolgate serve` checks it at start.
type deployedConfig struct {
	cfg  *catalog.Config
	snap *catalog.Snapshot
}

// loadConfig parses and compiles the ConfigMap's config.yaml with toolgate's
// own catalog package. Every environment variable the config names is set
// to a dummy value, as the Secrets would set them in the pod.
func loadConfig(t *testing.T, o *objects) deployedConfig {
	t.Helper()
	cm := o.configMaps[configMapName]
	if cm == nil {
		t.Fatalf("no ConfigMap %s", configMapName)
	}
	data, ok := cm.Data[configKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s key", configMapName, configKey)
	}
	cfg, err := catalog.Parse([]byte(data), configMapName+"/"+configKey)
	if err != nil {
		t.Fatalf("toolgate rejects the deployed config: %v", err)
	}
	for _, name := range envNames(cfg) {
		t.Setenv(name, "dummy-"+strings.ToLower(name))
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatalf("toolgate rejects the deployed config: %v", err)
	}
	return deployedConfig{cfg: cfg, snap: snap}
}

// envNames lists the environment variables a config reads.
func envNames(c *catalog.Config) []string {
	var names []string
	for _, u := range c.Upstreams {
		if u.APIKeyEnv != "" {
			names = append(names, u.APIKeyEnv)
		}
	}
	if c.InboundAuth.TokensEnv != "" {
		names = append(names, c.InboundAuth.TokensEnv)
	}
	for _, n := range []string{c.Escalation.Sinks.WebhookSecretEnv, c.Approvals.AdminTokenEnv,
		c.Approvals.NotifySecretEnv, c.Tracing.HeadersEnv} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

func splitAddr(t *testing.T, field, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", field, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s %q: %v", field, addr, err)
	}
	return host, n
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// toolgateContainer finds the container running the toolgate image, among
// the init containers (sidecar) or the app containers (shared).
func toolgateContainer(spec *corev1.PodSpec) (*corev1.Container, bool) {
	for i := range spec.InitContainers {
		if isToolgateImage(spec.InitContainers[i].Image) {
			return &spec.InitContainers[i], true
		}
	}
	for i := range spec.Containers {
		if isToolgateImage(spec.Containers[i].Image) {
			return &spec.Containers[i], false
		}
	}
	return nil, false
}

func isToolgateImage(image string) bool {
	ref, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref == "toolgate" || strings.HasSuffix(ref, "/toolgate")
}

// containerPort resolves a probe's or Service's port, by number or name.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, true
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// checkToolgatePod holds for every pod that runs toolgate, sidecar or
// shared: the hardening, the config mount, the probes, the secrets and the
// sizing.
func checkToolgatePod(t *testing.T, o *objects, d *appsv1.Deployment, dc deployedConfig) *corev1.Container {
	t.Helper()
	spec := &d.Spec.Template.Spec
	c, _ := toolgateContainer(spec)
	if c == nil {
		t.Fatalf("Deployment %s: no toolgate container", d.Name)
	}
	where := fmt.Sprintf("Deployment %s, container %s", d.Name, c.Name)

	// The image transformer reached it: a bare "toolgate" would be pulled
	// from Docker Hub.
	if c.Image == "toolgate" || !strings.Contains(c.Image, ":") {
		t.Errorf("%s: image %q has no registry or tag; the kustomization's images entry did not apply", where, c.Image)
	}
	if want := []string{"serve", "--config", configMount + "/" + configKey}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("%s: args %q, want %q", where, c.Args, want)
	}
	if len(c.Command) != 0 {
		t.Errorf("%s: command %q overrides the image's entrypoint", where, c.Command)
	}

	// Hardening: per container, and seccomp either there or pod-wide.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("%s: no securityContext", where)
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: runAsNonRoot not true", where)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != nonRootUID {
		t.Errorf("%s: runAsUser %v, want %d (the image's user)", where, sc.RunAsUser, nonRootUID)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation not false", where)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem not true", where)
	}
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities %+v, want drop [ALL] and nothing added", where, sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile %+v, want RuntimeDefault", where, seccomp)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("Deployment %s: automountServiceAccountToken not false; toolgate never calls the Kubernetes API", d.Name)
	}

	// The config: a whole-folder ConfigMap mount (no subPath, so the kubelet's
	// symlink swap reaches the process and triggers a reload).
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == configMount {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("%s: nothing mounted at %s", where, configMount)
	}
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		t.Errorf("%s: the config is mounted with subPath; updates would never reach toolgate", where)
	}
	if !mount.ReadOnly {
		t.Errorf("%s: config mount not readOnly", where)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == mount.Name {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != configMapName {
		t.Errorf("%s: volume %q is not the ConfigMap %s", where, mount.Name, configMapName)
	} else if _, ok := o.configMaps[vol.ConfigMap.Name]; !ok {
		t.Errorf("%s: ConfigMap %s is not in the build output", where, vol.ConfigMap.Name)
	} else if len(vol.ConfigMap.Items) > 0 {
		t.Errorf("%s: the ConfigMap volume selects items; %s must be there as config.yaml", where, configMapName)
	}

	// Probes: /healthz and /readyz on the admin listener, which must accept
	// connections on the pod IP, where the kubelet connects.
	adminHost, adminPortCfg := splitAddr(t, "admin_listen", dc.cfg.AdminListen)
	if adminPortCfg != adminPort {
		t.Errorf("config admin_listen port %d, want %d", adminPortCfg, adminPort)
	}
	if isLoopback(adminHost) {
		t.Errorf("config admin_listen %q is loopback: the kubelet's probes and Prometheus connect to the pod IP", dc.cfg.AdminListen)
	}
	probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
	wantPath := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}
	for kind, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no httpGet %s probe", where, kind)
			continue
		}
		if p.HTTPGet.Path != wantPath[kind] {
			t.Errorf("%s: %s probe path %q, want %q", where, kind, p.HTTPGet.Path, wantPath[kind])
		}
		if port, ok := containerPort(c, p.HTTPGet.Port); !ok || port != adminPort {
			t.Errorf("%s: %s probe port %s resolves to %d, want the admin port %d", where, kind, p.HTTPGet.Port.String(), port, adminPort)
		}
	}
	if p := c.StartupProbe; p != nil {
		if p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: startup probe should wait on /readyz", where)
		} else if port, ok := containerPort(c, p.HTTPGet.Port); !ok || port != adminPort {
			t.Errorf("%s: startup probe port %s, want the admin port", where, p.HTTPGet.Port.String())
		}
	}

	// Secrets: every variable the config names comes from a Secret.
	for _, name := range envNames(dc.cfg) {
		ev := envVar(c, name)
		switch {
		case ev == nil:
			t.Errorf("%s: the config reads $%s, which the container does not set", where, name)
		case ev.Value != "" || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil:
			t.Errorf("%s: $%s should come from a Secret (secretKeyRef)", where, name)
		case ev.ValueFrom.SecretKeyRef.Name == "" || ev.ValueFrom.SecretKeyRef.Key == "":
			t.Errorf("%s: $%s: secretKeyRef without name or key", where, name)
		case ev.ValueFrom.SecretKeyRef.Optional != nil && *ev.ValueFrom.SecretKeyRef.Optional:
			t.Errorf("%s: $%s: an optional secret would let toolgate start without it", where, name)
		}
	}

	// Shutdown: the kubelet's budget covers the preStop pause and the drain.
	grace := dc.cfg.Shutdown.Grace.D()
	var pause time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("%s: preStop needs the sleep action (the image has no shell)", where)
		} else {
			pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
	}
	tgps := time.Duration(-1)
	if p := d.Spec.Template.Spec.TerminationGracePeriodSeconds; p != nil {
		tgps = time.Duration(*p) * time.Second
	}
	if tgps <= pause+grace {
		t.Errorf("Deployment %s: terminationGracePeriodSeconds %v (unset: -1s) must exceed preStop %v + shutdown.grace %v", d.Name, tgps, pause, grace)
	}

	// Sizing: requests and limits set, GOMEMLIMIT under the memory limit.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("%s: no %s request", where, r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("%s: no %s limit", where, r)
		}
	}
	if ev := envVar(c, "GOMEMLIMIT"); ev != nil {
		limit := c.Resources.Limits[corev1.ResourceMemory]
		soft, err := resource.ParseQuantity(strings.TrimSuffix(ev.Value, "B"))
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT %q: %v", where, ev.Value, err)
		} else if soft.Cmp(limit) >= 0 {
			t.Errorf("%s: GOMEMLIMIT %s must stay below limits.memory %s", where, ev.Value, limit.String())
		}
	}

	// The proxy and admin ports the container declares are the config's.
	_, listenPort := splitAddr(t, "listen", dc.cfg.Listen)
	if port, ok := containerPort(c, intstr.FromString("proxy")); !ok || int(port) != listenPort {
		t.Errorf("%s: port \"proxy\" = %d, want listen's port %d", where, port, listenPort)
	}
	if port, ok := containerPort(c, intstr.FromString("admin")); !ok || port != adminPort {
		t.Errorf("%s: port \"admin\" = %d, want %d", where, port, adminPort)
	}
	return c
}

// checkMonitoring holds for both builds: the metrics Service reaches every
// toolgate pod's admin port, the ServiceMonitor selects that Service, and
// the PrometheusRule is deploy/prometheus/rules.yaml.
func checkMonitoring(t *testing.T, o *objects) {
	t.Helper()
	svc := o.services["toolgate-metrics"]
	if svc == nil {
		t.Fatal("no Service toolgate-metrics")
	}
	var metricsPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == "metrics" {
			metricsPort = &svc.Spec.Ports[i]
		}
	}
	if metricsPort == nil || metricsPort.Port != adminPort {
		t.Fatalf("Service toolgate-metrics: want a port named metrics on %d, have %+v", adminPort, svc.Spec.Ports)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	pods := 0
	for _, d := range o.deployments {
		c, _ := toolgateContainer(&d.Spec.Template.Spec)
		if c == nil {
			continue
		}
		pods++
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service toolgate-metrics does not select the pods of Deployment %s", d.Name)
		}
		if port, ok := containerPort(c, metricsPort.TargetPort); !ok || port != adminPort {
			t.Errorf("Service toolgate-metrics: targetPort %s does not reach %s's admin port", metricsPort.TargetPort.String(), d.Name)
		}
	}
	if pods == 0 {
		t.Error("no Deployment runs toolgate")
	}

	sm := o.serviceMonitors["toolgate"]
	if sm == nil {
		t.Fatal("no ServiceMonitor toolgate")
	}
	smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatalf("ServiceMonitor selector: %v", err)
	}
	if smSel.Empty() || !smSel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor toolgate does not select Service toolgate-metrics (labels %v)", svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want port metrics, path /metrics", sm.Spec.Endpoints)
	}

	pr := o.prometheusRules["toolgate"]
	if pr == nil {
		t.Fatal("no PrometheusRule toolgate")
	}
	data, err := os.ReadFile("prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want ruleFile
	if err := strictYAML(data, &want); err != nil {
		t.Fatalf("prometheus/rules.yaml: %v", err)
	}
	if !reflect.DeepEqual(pr.Spec, want) {
		got, _ := json.MarshalIndent(pr.Spec, "", "  ")
		exp, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("PrometheusRule toolgate differs from prometheus/rules.yaml; run `make prometheusrule`\ngot:  %s\nwant: %s", got, exp)
	}
}

func TestSidecarBase(t *testing.T) {
	o := build(t, baseDir)
	dc := loadConfig(t, o)
	checkMonitoring(t, o)

	d := o.deployments["example-agent"]
	if d == nil {
		t.Fatal("no Deployment example-agent")
	}
	spec := &d.Spec.Template.Spec
	c, inInit := toolgateContainer(spec)
	if c == nil || !inInit {
		t.Fatal("toolgate is not among the init containers: want a native sidecar")
	}
	// Native sidecar: an init container that keeps running.
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container %s: restartPolicy %v, want Always (native sidecar)", c.Name, c.RestartPolicy)
	}
	checkToolgatePod(t, o, d, dc)
	if c.StartupProbe == nil {
		t.Error("sidecar has no startupProbe: the agent could start before toolgate listens")
	}

	// The proxy is reachable only inside the pod, and the agent uses it.
	listenHost, listenPort := splitAddr(t, "listen", dc.cfg.Listen)
	if !isLoopback(listenHost) {
		t.Errorf("sidecar listen %q should be loopback: the agent shares the pod's network", dc.cfg.Listen)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("want one agent container, have %d", len(spec.Containers))
	}
	agent := &spec.Containers[0]
	base := envVar(agent, "OPENAI_BASE_URL")
	if base == nil {
		t.Fatal("agent: OPENAI_BASE_URL not set")
	}
	u, err := url.Parse(base.Value)
	if err != nil {
		t.Fatalf("agent: OPENAI_BASE_URL %q: %v", base.Value, err)
	}
	if port, _ := strconv.Atoi(u.Port()); u.Scheme != "http" || !isLoopback(u.Hostname()) || port != listenPort || u.Path != "/v1" {
		t.Errorf("agent: OPENAI_BASE_URL %q, want http://127.0.0.1:%d/v1 (toolgate's listen)", base.Value, listenPort)
	}

	// The upstream key stays in the sidecar: the agent sends a placeholder,
	// which only works if toolgate replaces it.
	for _, ev := range agent.Env {
		if ev.ValueFrom != nil && ev.ValueFrom.SecretKeyRef != nil {
			if tc := envVar(c, ev.Name); tc != nil && tc.ValueFrom != nil && tc.ValueFrom.SecretKeyRef != nil &&
				tc.ValueFrom.SecretKeyRef.Name == ev.ValueFrom.SecretKeyRef.Name {
				t.Errorf("agent: $%s reads toolgate's Secret %s; the key should live in the sidecar only", ev.Name, ev.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, up := range dc.cfg.Upstreams {
		if up.APIKeyEnv != "" && up.APIKeyMode != catalog.APIKeyReplace && envVar(agent, up.APIKeyEnv) != nil {
			t.Errorf("upstream %s: the agent sends its own $%s, so api_key_mode must be replace for toolgate's key to be used", up.Name, up.APIKeyEnv)
		}
	}
	if len(dc.snap.Tools) == 0 {
		t.Error("the sidecar config has an empty catalog; the example should show one")
	}

	if len(o.hpas)+len(o.pdbs)+len(o.networkPolicies) != 0 {
		t.Error("the base should not carry the shared overlay's HPA, PDB or NetworkPolicy")
	}
}

func TestSharedOverlay(t *testing.T) {
	o := build(t, sharedDir)
	dc := loadConfig(t, o)
	checkMonitoring(t, o)

	if _, ok := o.deployments["example-agent"]; ok {
		t.Error("the shared overlay still carries the example agent")
	}
	d := o.deployments["toolgate"]
	if d == nil {
		t.Fatal("no Deployment toolgate")
	}
	spec := &d.Spec.Template.Spec
	c, inInit := toolgateContainer(spec)
	if c == nil || inInit {
		t.Fatal("toolgate should be the Deployment's main container")
	}
	checkToolgatePod(t, o, d, dc)
	podLabels := labels.Set(d.Spec.Template.Labels)
	if podLabels["app.kubernetes.io/name"] != "toolgate" {
		t.Errorf("pod label app.kubernetes.io/name = %q, want toolgate", podLabels["app.kubernetes.io/name"])
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}

	// Exposed on the network, so clients must authenticate (toolgate
	// refuses to start otherwise, which loadConfig already proved).
	listenHost, listenPort := splitAddr(t, "listen", dc.cfg.Listen)
	if isLoopback(listenHost) {
		t.Errorf("shared listen %q is loopback: other pods could not connect", dc.cfg.Listen)
	}
	if dc.cfg.InboundAuth.TokensEnv == "" || len(dc.snap.Secrets.InboundTokens) == 0 {
		t.Error("shared config without inbound_auth.tokens_env")
	}

	svc := o.services["toolgate"]
	if svc == nil {
		t.Fatal("no Service toolgate")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service toolgate does not select the toolgate pods")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != proxyPort {
		t.Errorf("Service toolgate ports %+v, want one on %d", svc.Spec.Ports, proxyPort)
	} else if port, ok := containerPort(c, svc.Spec.Ports[0].TargetPort); !ok || int(port) != listenPort {
		t.Errorf("Service toolgate targets port %d, toolgate listens on %d", port, listenPort)
	}

	hpa := o.hpas["toolgate"]
	if hpa == nil {
		t.Fatal("no HorizontalPodAutoscaler toolgate")
	}
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA scales %+v, want Deployment %s", ref, d.Name)
	}
	cpu := false
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil {
			cpu = true
		}
	}
	if !cpu {
		t.Error("HPA does not scale on CPU utilization")
	}

	pdb := o.pdbs["toolgate"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget toolgate")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || s.Empty() || !s.Matches(podLabels) {
		t.Errorf("PDB selector does not select the toolgate pods (%v)", err)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas <= pdb.Spec.MinAvailable.IntVal {
		t.Errorf("HPA minReplicas %v must exceed the PDB's minAvailable, or no pod could ever be evicted", hpa.Spec.MinReplicas)
	}

	spread := false
	for _, tsc := range spec.TopologySpreadConstraints {
		s, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if tsc.TopologyKey == "kubernetes.io/hostname" && err == nil && s.Matches(podLabels) {
			spread = true
		}
	}
	if !spread {
		t.Error("no topologySpreadConstraint across kubernetes.io/hostname selecting the toolgate pods")
	}

	np := o.networkPolicies["toolgate"]
	if np == nil {
		t.Fatal("no NetworkPolicy toolgate")
	}
	if s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(podLabels) {
		t.Error("NetworkPolicy does not select the toolgate pods")
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	// Which peers reach which port.
	reach := map[int32][]string{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("NetworkPolicy rule without a port opens every port: %+v", rule)
				continue
			}
			port, ok := containerPort(c, *p.Port)
			if !ok {
				t.Errorf("NetworkPolicy port %s is not a toolgate port", p.Port.String())
			}
			for _, peer := range rule.From {
				switch {
				case peer.PodSelector != nil && peer.NamespaceSelector == nil:
					reach[port] = append(reach[port], "pods:"+labels.Set(peer.PodSelector.MatchLabels).String())
				case peer.NamespaceSelector != nil && peer.PodSelector == nil:
					reach[port] = append(reach[port], "namespaces:"+labels.Set(peer.NamespaceSelector.MatchLabels).String())
				default:
					reach[port] = append(reach[port], fmt.Sprintf("other:%+v", peer))
				}
			}
		}
		if len(rule.From) == 0 {
			t.Errorf("NetworkPolicy rule without from admits everyone: %+v", rule)
		}
	}
	want := map[int32][]string{
		int32(listenPort): {"pods:toolgate.dev/client=true"},
		adminPort:         {"namespaces:kubernetes.io/metadata.name=monitoring", "pods:toolgate.dev/approver=true"},
	}
	if !reflect.DeepEqual(reach, want) {
		t.Errorf("NetworkPolicy admits %v, want %v", reach, want)
	}
	checkSharedApprovals(t, o, dc, c, podLabels)
}

// checkSharedApprovals: the replicas share a Redis approvals store that
// only they reach, and the admin token comes from a Secret.
func checkSharedApprovals(t *testing.T, o *objects, dc deployedConfig, c *corev1.Container, podLabels labels.Set) {
	t.Helper()
	if !slices.ContainsFunc(dc.cfg.Catalog.Tools, func(tc catalog.ToolConfig) bool { return tc.Policy == catalog.PolicyConfirm }) {
		t.Error("the shared config has no policy: confirm tool, so its approvals wiring is never exercised")
	}
	store := dc.cfg.Approvals.Store
	host, ok := strings.CutPrefix(store, "redis://")
	if !ok {
		t.Fatalf("approvals.store %q: replicas need a shared redis:// store", store)
	}
	host, _, _ = strings.Cut(host, "/")
	name, port, _ := strings.Cut(host, ":")
	svc := o.services[name]
	if svc == nil {
		t.Fatalf("approvals.store names host %s, but there is no such Service", name)
	}
	redis := o.statefulSets[name]
	if redis == nil {
		t.Fatalf("no StatefulSet %s behind the approvals store", name)
	}
	redisLabels := labels.Set(redis.Spec.Template.Labels)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(redisLabels) {
		t.Errorf("Service %s does not select the redis pods", name)
	}
	if len(svc.Spec.Ports) != 1 || fmt.Sprint(svc.Spec.Ports[0].Port) != port {
		t.Errorf("Service %s ports %+v, approvals.store uses port %s", name, svc.Spec.Ports, port)
	}
	img := redis.Spec.Template.Spec.Containers[0].Image
	if !strings.HasPrefix(img, "docker.io/library/redis:") {
		t.Errorf("redis image %q is not a fully qualified reference", img)
	}
	ev := envVar(c, dc.cfg.Approvals.AdminTokenEnv)
	if dc.cfg.Approvals.AdminTokenEnv == "" || ev == nil || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil {
		t.Errorf("approvals.admin_token_env %q is not set from a Secret", dc.cfg.Approvals.AdminTokenEnv)
	}
	np := o.networkPolicies[name]
	if np == nil {
		t.Fatalf("no NetworkPolicy %s: anything in the cluster could write approvals", name)
	}
	if s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(redisLabels) {
		t.Errorf("NetworkPolicy %s does not select the redis pods", name)
	}
	for _, rule := range np.Spec.Ingress {
		for _, peer := range rule.From {
			s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if peer.PodSelector == nil || peer.NamespaceSelector != nil || err != nil || !s.Matches(podLabels) ||
				s.Matches(labels.Set{"toolgate.dev/client": "true"}) {
				t.Errorf("NetworkPolicy %s admits %+v, want the toolgate pods only", name, peer)
			}
		}
		if len(rule.From) == 0 {
			t.Errorf("NetworkPolicy %s admits everyone", name)
		}
	}
}

// TestKustomizationsDecodeStrictly proves the strict decoder is strict: a
// field the API type lacks must fail, or the checks above prove nothing.
func TestKustomizationsDecodeStrictly(t *testing.T) {
	var d appsv1.Deployment
	err := strictYAML([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n"), &d)
	if err == nil {
		t.Fatal("an unknown field decoded without error")
	}
	var sm serviceMonitor
	if err := strictYAML([]byte("spec:\n  endpoints:\n    - port: metrics\n      intervall: 30s\n"), &sm); err == nil {
		t.Fatal("an unknown ServiceMonitor field decoded without error")
	}
}
