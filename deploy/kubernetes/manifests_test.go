// Package kubernetes holds opsbot's Kubernetes manifests; its test decodes
// them strictly into the Kubernetes API types, offline, and holds them to
// the deployment opsbot supports.
package kubernetes

import (
	"bytes"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization these manifests
// use; decoding strictly into it refuses any other key.
type kustomization struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Namespace          string   `json:"namespace"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
	Images []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
}

// manifests are the resources kustomization.yaml lists, each decoded
// strictly into its API type.
type manifests struct {
	k          kustomization
	deployment *appsv1.Deployment
	service    *corev1.Service
	pvc        *corev1.PersistentVolumeClaim
	namespace  *corev1.Namespace
	configText []byte // the generated ConfigMap's opsbot.yaml
}

func strict(t *testing.T, file string, into any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s does not decode strictly: %v", file, err)
	}
}

func load(t *testing.T) manifests {
	t.Helper()
	var m manifests
	strict(t, "kustomization.yaml", &m.k)
	if m.k.APIVersion != "kustomize.config.k8s.io/v1beta1" || m.k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml is %s %s", m.k.APIVersion, m.k.Kind)
	}
	for _, r := range m.k.Resources {
		raw, err := os.ReadFile(r)
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", r, err)
		}
		if bytes.Contains(raw, []byte("\n---")) {
			t.Fatalf("%s holds several documents; keep one a file", r)
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			m.deployment = new(appsv1.Deployment)
			strict(t, r, m.deployment)
		case "v1 Service":
			m.service = new(corev1.Service)
			strict(t, r, m.service)
		case "v1 PersistentVolumeClaim":
			m.pvc = new(corev1.PersistentVolumeClaim)
			strict(t, r, m.pvc)
		case "v1 Namespace":
			m.namespace = new(corev1.Namespace)
			strict(t, r, m.namespace)
		default:
			t.Fatalf("%s is a %s %s, which this test does not know: decode it here", r, meta.APIVersion, meta.Kind)
		}
	}
	if m.deployment == nil || m.service == nil || m.pvc == nil || m.namespace == nil {
		t.Fatalf("kustomization.yaml lacks a Deployment, Service, PersistentVolumeClaim or Namespace")
	}
	if len(m.k.ConfigMapGenerator) != 1 || len(m.k.ConfigMapGenerator[0].Files) != 1 {
		t.Fatalf("configMapGenerator = %+v, want one ConfigMap from one file", m.k.ConfigMapGenerator)
	}
	var err error
	if m.configText, err = os.ReadFile(m.k.ConfigMapGenerator[0].Files[0]); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%d containers, want opsbot alone", len(cs))
	}
	return cs[0]
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// mountOf is the volume mounted at the directory holding file, and the mount.
func mountOf(t *testing.T, d *appsv1.Deployment, c corev1.Container, file string) (corev1.Volume, corev1.VolumeMount) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == path.Dir(file) {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == vm.Name {
					return v, vm
				}
			}
			t.Fatalf("the mount %s names no volume %s", vm.MountPath, vm.Name)
		}
	}
	t.Fatalf("nothing is mounted at %s (for %s)", path.Dir(file), file)
	return corev1.Volume{}, corev1.VolumeMount{}
}

// The deployment opsbot supports: one pod at a time (the bbolt file lock),
// replaced by stopping the old one first; its database on the claim at the
// directory of OPSBOT_STATE_PATH; probes on /healthz and /readyz at the
// port opsbot listens on; the image's user, a read-only root; resources.
func TestDeploymentIsTheOneOpsbotSupports(t *testing.T) {
	m := load(t)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1: the bbolt file takes one process", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy = %q, want Recreate: a rolling update starts a second pod while the first holds the database", d.Spec.Strategy.Type)
	}
	c := m.container(t)
	env := envOf(c)

	_, port, err := net.SplitHostPort(env["OPSBOT_LISTEN"])
	if err != nil {
		t.Fatalf("OPSBOT_LISTEN = %q: %v", env["OPSBOT_LISTEN"], err)
	}
	var named string
	for _, p := range c.Ports {
		if strconv.Itoa(int(p.ContainerPort)) == port {
			named = p.Name
		}
	}
	if named == "" {
		t.Fatalf("no container port is %s, the port of OPSBOT_LISTEN", port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || (g.Port.String() != named && g.Port.String() != port) {
			t.Errorf("%s probe asks %s on port %s, want %s on %s (%s)", p.name, g.Path, g.Port.String(), p.path, port, named)
		}
	}
	if tp := m.service.Spec.Ports; len(tp) != 1 || (tp[0].TargetPort.String() != named && tp[0].TargetPort.String() != port) {
		t.Errorf("the Service's ports %+v do not reach the container's %s", tp, port)
	}
	if !m.service.Spec.PublishNotReadyAddresses {
		t.Errorf("the Service drops the pod while /readyz answers 503, so webhooks GitHub sends then are refused: set publishNotReadyAddresses")
	}
	for k, v := range m.service.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pod does not carry", k, v)
		}
	}

	state := env["OPSBOT_STATE_PATH"]
	vol, _ := mountOf(t, d, c, state)
	if vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != m.pvc.Name {
		t.Errorf("%s is on %+v, want the claim %s", state, vol.VolumeSource, m.pvc.Name)
	}
	if !slices.Equal(m.pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("the claim's access modes = %v, want ReadWriteOnce", m.pvc.Spec.AccessModes)
	}

	ps, cs := d.Spec.Template.Spec.SecurityContext, c.SecurityContext
	if ps == nil || cs == nil || ps.RunAsUser == nil || *ps.RunAsUser != 65532 || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot ||
		ps.FSGroup == nil || *ps.FSGroup != 65532 || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil ||
		!slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("security context: pod %+v, container %+v; want uid 65532 (the image's), fsGroup 65532, non-root, "+
			"a read-only root, no escalation, no capabilities", ps, cs)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || mem.Value() < 256<<20 {
		t.Errorf("memory limit %v: docs/BENCHMARKS.md measured 125 MB at peak under ingest; leave room", mem.String())
	}
	if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("the pod mounts a service account token; opsbot never uses the Kubernetes API")
	}
}

// The image is the one the release workflow pushes: ghcr.io and the
// repository's name in lower case (ghcr's names are lower case).
func TestImageIsTheReleasedOne(t *testing.T) {
	m := load(t)
	c := m.container(t)
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	repo := strings.TrimPrefix(regexp.MustCompile(`(?m)^module (\S+)`).FindStringSubmatch(string(mod))[1], "github.com/")
	want := "ghcr.io/" + strings.ToLower(repo)
	if c.Image != want {
		t.Errorf("image = %q, want %q", c.Image, want)
	}
	if len(m.k.Images) != 1 || m.k.Images[0].Name != want || m.k.Images[0].NewTag == "" || m.k.Images[0].NewTag == "latest" {
		t.Errorf("kustomization images = %+v, want %s pinned to a release tag", m.k.Images, want)
	}
	wf, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wf), `name=ghcr.io/${REPOSITORY,,}`) {
		t.Errorf("release.yml no longer names the image ghcr.io/OWNER/REPO in lower case; make this test and the manifests agree with it")
	}
}

// The ConfigMap's opsbot.yaml is a configuration opsbot takes, that agrees
// with the Deployment: listen and state_path as the environment overrides
// them, every variable the pod sets one opsbot reads, every secret file in
// the Secret's mount, the ConfigMap mounted where serve reads it.
func TestConfigAndSecretsAgreeWithOpsbot(t *testing.T) {
	m := load(t)
	d := m.deployment
	c := m.container(t)
	env := envOf(c)

	var raw struct {
		Listen    string `json:"listen"`
		StatePath string `json:"state_path"`
	}
	if err := yaml.Unmarshal(m.configText, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Listen != env["OPSBOT_LISTEN"] || raw.StatePath != env["OPSBOT_STATE_PATH"] {
		t.Errorf("opsbot.yaml says listen %q, state_path %q; the pod's environment %q, %q: keep them alike",
			raw.Listen, raw.StatePath, env["OPSBOT_LISTEN"], env["OPSBOT_STATE_PATH"])
	}
	// The state directory exists only in the pod: check the rest here.
	text := strings.Replace(string(m.configText), raw.StatePath, filepath.Join(t.TempDir(), "opsbot.db"), 1)
	// As it is, the starter is refused for each placeholder left in it.
	_, err := config.Parse([]byte(text))
	if err == nil || !strings.Contains(err.Error(), `api.github_oidc.audience: "https://YOUR-HOST" holds the placeholder YOUR-HOST`) ||
		!strings.Contains(err.Error(), "github.app.id: 1 is the starter configuration's placeholder") {
		t.Fatalf("opsbot.yaml with its placeholders: %v; want each refused", err)
	}
	// Filled in as its README says, it loads, with no warning.
	text = strings.Replace(strings.ReplaceAll(text, "YOUR-HOST", "opsbot.example.org"), "    id: 1 ", "    id: 123456 ", 1)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("opsbot.yaml filled in: %v", err)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("opsbot.yaml draws warnings from config check: %q", w)
	}
	if cfg.Slack.TokenEnv == "" || cfg.Slack.Channel == "" {
		t.Errorf("opsbot.yaml has no Slack (token_env %q, channel %q)", cfg.Slack.TokenEnv, cfg.Slack.Channel)
	}

	reads := map[string]bool{"OPSBOT_LISTEN": true, "OPSBOT_STATE_PATH": true}
	for _, v := range []string{cfg.GitHub.WebhookSecretEnv, cfg.GitHub.TokenEnv, cfg.API.TokensEnv, cfg.API.GateTokensEnv,
		cfg.API.AdminTokensEnv, cfg.Slack.TokenEnv, cfg.AuditWeb.UserEnv, cfg.AuditWeb.PasswordEnv, cfg.Metrics.TokenEnv} {
		if v != "" {
			reads[v], reads[v+"_FILE"] = true, true
		}
	}
	var secretFiles []string
	for _, e := range c.Env {
		if !reads[e.Name] {
			t.Errorf("the pod sets %s, which opsbot with this configuration does not read", e.Name)
		}
		if e.ValueFrom == nil && strings.HasSuffix(e.Name, "_FILE") {
			secretFiles = append(secretFiles, e.Value)
		}
	}
	if !slices.Contains(secretFiles, env[cfg.GitHub.WebhookSecretEnv+"_FILE"]) || env[cfg.GitHub.WebhookSecretEnv+"_FILE"] == "" {
		t.Errorf("the webhook secret (%s) is not set from a file", cfg.GitHub.WebhookSecretEnv)
	}
	if cfg.GitHub.App != nil {
		secretFiles = append(secretFiles, cfg.GitHub.App.PrivateKeyFile)
	}
	for _, f := range secretFiles {
		vol, vm := mountOf(t, d, c, f)
		if vol.Secret == nil || !vm.ReadOnly {
			t.Errorf("%s is in %+v, want a read-only mount of the Secret", f, vol.VolumeSource)
		}
	}

	vol, _ := mountOf(t, d, c, "/etc/opsbot/opsbot.yaml")
	if vol.ConfigMap == nil || vol.ConfigMap.Name != m.k.ConfigMapGenerator[0].Name {
		t.Errorf("/etc/opsbot is %+v, want the generated ConfigMap %s", vol.VolumeSource, m.k.ConfigMapGenerator[0].Name)
	}
	if !slices.Equal(c.Args, []string{"serve", "--config", "/etc/opsbot/" + filepath.Base(m.k.ConfigMapGenerator[0].Files[0])}) {
		t.Errorf("args = %v, want serve --config on the mounted file", c.Args)
	}
}
