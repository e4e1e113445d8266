// idoracle answers the questions pfr_identity answers, with Go's regexp and path packages, so
// that the C code can be checked against the semantics of the Go programs it follows
// (coroot-node-agent, Coroot). The rules are restated here from their documented behaviour.
//
// Protocol: one request per line on stdin, "<op> x<hex arg> [x<hex arg>...]"; one answer per
// line on stdout, fields "x<hex>" separated by spaces. Ops:
//
//	svc <id>                     -> service name of a container id
//	cg <path>                    -> kind, runtime id, id of a cgroup path
//	k8s <ns> <pod> <c> <now>     -> Kubernetes container id ("" for none)
//	proc <text>                  -> the cgroup path picked from /proc/PID/cgroup text
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	deployment  = regexp.MustCompile(`(/k8s/[a-z0-9-]+/[a-z0-9-]+)-[0-9a-f]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}/.+`)
	daemonset   = regexp.MustCompile(`(/k8s/[a-z0-9-]+/[a-z0-9-]+)-[bcdfghjklmnpqrstvwxz2456789]{5}/.+`)
	statefulset = regexp.MustCompile(`(/k8s/[a-z0-9-]+/[a-z0-9-]+)-\d+/.+`)

	anyID        = regexp.MustCompile(`([a-z0-9]{64})`)
	crioID       = regexp.MustCompile(`crio-([a-z0-9]{64})`)
	containerdID = regexp.MustCompile(`cri-containerd[-:]([a-z0-9]{64})`)
	lxcName      = regexp.MustCompile(`/lxc/([^/]+)`)
	sliceUnit    = regexp.MustCompile(`(/(system|runtime|reserved|kube|azure|podruntime)\.slice/([^/]+))`)
	talosUnit    = regexp.MustCompile(`/(system|podruntime)/([^/]+)`)
	lxcPayload   = regexp.MustCompile(`/lxc\.payload\.([^/]+)`)
	cronjobPod   = regexp.MustCompile(`([a-z0-9-]+)-([0-9]{8})-[bcdfghjklmnpqrstvwxz2456789]{5}`)
)

func service(id string) string {
	if !strings.HasPrefix(id, "/k8s/") {
		return id
	}
	for _, r := range []*regexp.Regexp{deployment, daemonset, statefulset} {
		if g := r.FindStringSubmatch(id); len(g) == 2 {
			return g[1]
		}
	}
	return id
}

// classify returns kind, runtime id, id as pfr_identity_classify reports them.
func classify(p string) (string, string, string) {
	if p != "" {
		p = path.Clean(p)
	}
	if strings.HasSuffix(p, "(deleted)") {
		return "plain", "", ""
	}
	parts := strings.Split(strings.TrimLeft(p, "/"), "/")
	prefix := parts[0]
	switch {
	case p == "/init":
		return "talos", "", "/talos/init"
	case prefix == "user.slice" || prefix == "init.scope" || prefix == "systemd":
		return "plain", "", ""
	case prefix == "docker" || (prefix == "system.slice" && len(parts) > 1 && strings.HasPrefix(parts[1], "docker-")):
		if m := anyID.FindStringSubmatch(p); m != nil {
			return "docker", m[1], ""
		}
		return "unknown", "", ""
	case strings.Contains(p, "kubepods"):
		if m := crioID.FindStringSubmatch(p); m != nil {
			return "crio", m[1], ""
		}
		if strings.Contains(p, "crio-conmon-") {
			return "unknown", "", ""
		}
		if m := containerdID.FindStringSubmatch(p); m != nil {
			return "containerd", m[1], ""
		}
		if m := anyID.FindStringSubmatch(p); m != nil {
			return "docker", m[1], ""
		}
		return "sandbox", "", ""
	case prefix == "system" || prefix == "podruntime":
		if m := talosUnit.FindStringSubmatch(p); m != nil {
			return "talos", "", path.Join("/talos/", m[2])
		}
		return "unknown", "", ""
	case prefix == "system.slice" || prefix == "runtime.slice" || prefix == "reserved.slice" || prefix == "kube.slice" || prefix == "azure.slice" || prefix == "podruntime.slice":
		if strings.HasSuffix(p, ".scope") {
			return "plain", "", ""
		}
		m := sliceUnit.FindStringSubmatch(p)
		if m == nil {
			return "unknown", "", ""
		}
		id := strings.Replace(m[1], "\\x2d", "-", -1)
		if strings.HasPrefix(id, "/system.slice/crio-conmon-") { // calcId drops it
			return "plain", "", ""
		}
		return "systemd", "", id
	case prefix == "lxc":
		if m := lxcName.FindStringSubmatch(p); m != nil {
			return "lxc", "", "/lxc/" + m[1]
		}
		return "unknown", "", ""
	case strings.HasPrefix(prefix, "lxc.payload."):
		if m := lxcPayload.FindStringSubmatch(p); m != nil {
			return "lxc", "", "/lxc/" + m[1]
		}
		return "unknown", "", ""
	case len(parts) < 2:
		return "plain", "", ""
	}
	return "unknown", "", ""
}

func k8sID(ns, pod, name string, now int64) string {
	if name == "" || name == "POD" {
		return ""
	}
	if g := cronjobPod.FindStringSubmatch(pod); len(g) == 3 {
		minutes, _ := strconv.ParseUint(g[2], 10, 64)
		at := time.Unix(int64(minutes)*60, 0)
		t := time.Unix(now, 0)
		window := 7 * 24 * time.Hour
		if at.After(t.Add(-window)) && at.Before(t.Add(window)) {
			return fmt.Sprintf("/k8s-cronjob/%s/%s/%s", ns, g[1], name)
		}
	}
	return fmt.Sprintf("/k8s/%s/%s/%s", ns, pod, name)
}

func procPath(text string) string {
	subs := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		for _, t := range strings.Split(parts[1], ",") {
			p := parts[2]
			if strings.HasPrefix(parts[2], "/lxc.payload.") {
				p = "/" + strings.Split(p, "/")[1]
			}
			p = path.Join("", p)
			if p == "/" || p == "/init.scope" {
				continue
			}
			subs[t] = p
		}
	}
	v2, cpu, mem, name := subs[""], subs["cpu"], subs["memory"], subs["name=systemd"]
	if strings.HasPrefix(cpu, "/kubepods") {
		return cpu
	}
	if strings.HasPrefix(mem, "/kubepods") {
		return mem
	}
	for _, p := range []string{v2, cpu, mem} {
		if p != "" {
			return p
		}
	}
	return name
}

func arg(s string) string {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "x"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad hex:", err)
		os.Exit(2)
	}
	return string(b)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		var a []string
		for _, x := range f[1:] {
			a = append(a, arg(x))
		}
		var res []string
		switch {
		case f[0] == "svc" && len(a) == 1:
			res = []string{service(a[0])}
		case f[0] == "cg" && len(a) == 1:
			k, r, id := classify(a[0])
			res = []string{k, r, id}
		case f[0] == "k8s" && len(a) == 4:
			now, _ := strconv.ParseInt(a[3], 10, 64)
			res = []string{k8sID(a[0], a[1], a[2], now)}
		case f[0] == "proc" && len(a) == 1:
			res = []string{procPath(a[0])}
		default:
			fmt.Fprintln(os.Stderr, "bad request:", in.Text())
			os.Exit(2)
		}
		for i, r := range res {
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString("x" + hex.EncodeToString([]byte(r)))
		}
		out.WriteByte('\n')
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
