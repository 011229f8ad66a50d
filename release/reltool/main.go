// Command reltool is the part of release.sh that is easier said in Go: it
// reads the module list (modules.txt), sets the version the modules require
// of each other, and writes module zips into a file-based module proxy
// exactly as the go command builds them from a git tag.
//
//	reltool modules REPO                      check modules.txt, print one line a module
//	reltool version REPO                      the version at which the modules require each other
//	reltool checkversion REPO VERSION         VERSION is valid for a release, above every released one
//	reltool setversion REPO VERSION           every faucet require (and go.work's replaces) at VERSION
//	reltool stripsums REPO                    drop faucet's lines from every go.sum
//	reltool restoresums REPO ORIGREPO         faucet's go.sum lines back as ORIGREPO has them
//	reltool zip REPO REV VERSION PROXY DIR... add the modules in DIRs at REV to PROXY as VERSION
//
// REPO is the root of a git checkout. The tool lives in a module of its own,
// outside go.work and never released, so that golang.org/x/mod is no
// requirement of any faucet module.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// toolDir is this module's directory: a module of the repository that
// modules.txt does not list, since it is no part of what is shipped.
const toolDir = "release"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "modules":
		if len(args) != 1 {
			usage()
		}
		err = printModules(args[0])
	case "version":
		if len(args) != 1 {
			usage()
		}
		err = printVersion(args[0])
	case "stripsums":
		if len(args) != 1 {
			usage()
		}
		err = stripSums(args[0])
	case "restoresums":
		if len(args) != 2 {
			usage()
		}
		err = restoreSums(args[0], args[1])
	case "checkversion":
		if len(args) != 2 {
			usage()
		}
		err = checkVersion(args[0], args[1])
	case "setversion":
		if len(args) != 2 {
			usage()
		}
		err = setVersion(args[0], args[1])
	case "zip":
		if len(args) < 5 {
			usage()
		}
		err = zipModules(args[0], args[1], args[2], args[3], args[4:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reltool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
	reltool modules REPO
	reltool version REPO
	reltool checkversion REPO VERSION
	reltool setversion REPO VERSION
	reltool stripsums REPO
	reltool restoresums REPO ORIGREPO
	reltool zip REPO REV VERSION PROXYDIR DIR...`)
	os.Exit(2)
}

// A mod is one line of modules.txt with what its go.mod says.
type mod struct {
	Dir      string   // relative to the repository root, "." for the root
	Path     string   // module path
	Released bool     // tagged and published
	Requires []string // paths of the listed modules it requires
}

// loadModules reads modules.txt at the repository root and checks it
// against the repository: every go.mod git tracks is listed (but the
// tool's own), go.work uses exactly the listed modules, and every module
// comes after the listed modules it requires; a released module requires
// no unreleased one.
func loadModules(repo string) ([]mod, error) {
	data, err := os.ReadFile(filepath.Join(repo, "modules.txt"))
	if err != nil {
		return nil, err
	}
	var mods []mod
	byPath := map[string]int{}
	byDir := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || (f[1] != "yes" && f[1] != "no") {
			return nil, fmt.Errorf("modules.txt:%d: want \"DIR yes|no\", have %q", n, sc.Text())
		}
		dir := path.Clean(f[0])
		if byDir[dir] {
			return nil, fmt.Errorf("modules.txt:%d: %s listed twice", n, dir)
		}
		byDir[dir] = true
		gomod, err := readMod(filepath.Join(repo, filepath.FromSlash(dir), "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("modules.txt:%d: %v", n, err)
		}
		m := mod{Dir: dir, Path: gomod.Module.Mod.Path, Released: f[1] == "yes"}
		mods = append(mods, m)
		byPath[m.Path] = len(mods) - 1
	}
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, errors.New("modules.txt: the root module (.) must be listed first")
	}
	// The go command finds version v of the module in DIR at the tag
	// DIR/v only if its path is the root module's path followed by DIR.
	for _, m := range mods[1:] {
		if want := mods[0].Path + "/" + m.Dir; m.Path != want {
			return nil, fmt.Errorf("%s/go.mod: module %s, want %s", m.Dir, m.Path, want)
		}
	}
	for i := range mods {
		m := &mods[i]
		gomod, _ := readMod(filepath.Join(repo, filepath.FromSlash(m.Dir), "go.mod"))
		for _, r := range gomod.Require {
			j, ok := byPath[r.Mod.Path]
			if !ok {
				if strings.HasPrefix(r.Mod.Path, mods[0].Path+"/") {
					return nil, fmt.Errorf("%s requires %s, which modules.txt does not list", m.Dir, r.Mod.Path)
				}
				continue
			}
			if j >= i {
				return nil, fmt.Errorf("modules.txt: %s requires %s: list %s before it", m.Dir, mods[j].Dir, mods[j].Dir)
			}
			if m.Released && !mods[j].Released {
				return nil, fmt.Errorf("%s is released but requires %s, which is not", m.Dir, mods[j].Dir)
			}
			m.Requires = append(m.Requires, r.Mod.Path)
		}
	}

	// Every go.mod in the repository is listed, but this tool's.
	out, err := git(repo, "ls-files", "-z")
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Split(out, "\x00") {
		if path.Base(f) != "go.mod" {
			continue
		}
		if dir := path.Dir(f); !byDir[dir] && dir != toolDir {
			return nil, fmt.Errorf("%s is not listed in modules.txt", f)
		}
	}

	// go.work uses exactly the listed modules.
	wdata, err := os.ReadFile(filepath.Join(repo, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", wdata, nil)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, u := range work.Use {
		used[path.Clean(u.Path)] = true
	}
	for _, m := range mods {
		if !used[m.Dir] {
			return nil, fmt.Errorf("go.work does not use %s, which modules.txt lists", m.Dir)
		}
		delete(used, m.Dir)
	}
	for dir := range used {
		return nil, fmt.Errorf("go.work uses %s, which modules.txt does not list", dir)
	}
	return mods, nil
}

func readMod(file string) (*modfile.File, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s: no module statement", file)
	}
	return f, nil
}

// printModules writes one line a module, in dependency order:
// DIR PATH yes|no REQUIRED-DIRS (comma-separated, "-" for none).
func printModules(repo string) error {
	mods, err := loadModules(repo)
	if err != nil {
		return err
	}
	dirOf := map[string]string{}
	for _, m := range mods {
		dirOf[m.Path] = m.Dir
	}
	for _, m := range mods {
		rel := "no"
		if m.Released {
			rel = "yes"
		}
		var req []string
		for _, p := range m.Requires {
			req = append(req, dirOf[p])
		}
		if len(req) == 0 {
			req = []string{"-"}
		}
		fmt.Printf("%s %s %s %s\n", m.Dir, m.Path, rel, strings.Join(req, ","))
	}
	return nil
}

// validVersion reports whether v can be the version of every faucet module.
func validVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("%q is not a canonical semantic version (vMAJOR.MINOR.PATCH[-PRERELEASE])", v)
	}
	if semver.Major(v) != "v0" && semver.Major(v) != "v1" {
		return fmt.Errorf("%s: a major version above v1 needs a /%s suffix on every module path first", v, semver.Major(v))
	}
	return nil
}

// checkVersion reports whether v is a version to release: valid, and above
// every version the root module is tagged with.
func checkVersion(repo, v string) error {
	if err := validVersion(v); err != nil {
		return err
	}
	out, err := git(repo, "tag", "--list", "v*")
	if err != nil {
		return err
	}
	for _, t := range strings.Fields(out) {
		if semver.IsValid(t) && semver.Compare(t, v) >= 0 {
			return fmt.Errorf("%s is not above %s, released already", v, t)
		}
	}
	return nil
}

// setVersion makes every listed module require the listed modules it
// requires at version v, with no replace for them, and makes go.work
// replace each released module at v with its directory: the workspace
// builds the tree as it is, and needs no v from any proxy (v may not
// exist yet, or be an earlier state of the tree).
func setVersion(repo, v string) error {
	if err := validVersion(v); err != nil {
		return err
	}
	mods, err := loadModules(repo)
	if err != nil {
		return err
	}
	listed := map[string]mod{}
	for _, m := range mods {
		listed[m.Path] = m
	}
	for _, m := range mods {
		file := filepath.Join(repo, filepath.FromSlash(m.Dir), "go.mod")
		f, err := readMod(file)
		if err != nil {
			return err
		}
		for _, p := range m.Requires {
			if err := f.AddRequire(p, v); err != nil {
				return err
			}
		}
		for _, r := range slices.Clone(f.Replace) {
			if _, ok := listed[r.Old.Path]; ok {
				if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return err
				}
			}
		}
		f.SortBlocks()
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return err
		}
		if err := writeIfChanged(file, out); err != nil {
			return err
		}
	}

	file := filepath.Join(repo, "go.work")
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	w, err := modfile.ParseWork(file, data, nil)
	if err != nil {
		return err
	}
	for _, r := range slices.Clone(w.Replace) {
		if _, ok := listed[r.Old.Path]; ok {
			if err := w.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, m := range mods { // in list order, for a stable go.work
		if m.Released {
			if err := w.AddReplace(m.Path, v, "./"+strings.TrimPrefix(m.Dir, "."), ""); err != nil {
				return err
			}
		}
	}
	w.SortBlocks()
	w.Cleanup()
	return writeIfChanged(file, modfile.Format(w.Syntax))
}

// printVersion prints the one version at which the listed modules require
// each other ("none" if none requires another).
func printVersion(repo string) error {
	mods, err := loadModules(repo)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, m := range mods {
		listed[m.Path] = true
	}
	seen := map[string][]string{}
	for _, m := range mods {
		f, err := readMod(filepath.Join(repo, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return err
		}
		for _, r := range f.Require {
			if listed[r.Mod.Path] {
				seen[r.Mod.Version] = append(seen[r.Mod.Version], m.Dir+": "+r.Mod.String())
			}
		}
	}
	switch len(seen) {
	case 0:
		fmt.Println("none")
		return nil
	case 1:
		for v := range seen {
			fmt.Println(v)
		}
		return nil
	}
	var all []string
	for _, rs := range seen {
		all = append(all, rs...)
	}
	slices.Sort(all)
	return fmt.Errorf("the modules require each other at different versions (release.sh sets one):\n\t%s", strings.Join(all, "\n\t"))
}

// isFaucet reports whether module path p is the root module's or below it.
func isFaucet(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}

// sumLines returns the lines of a go.sum file ("" if there is none).
func sumLines(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.SplitAfter(string(data), "\n"), nil
}

// stripSums drops the lines of faucet's modules from every listed module's
// go.sum: a tidy against a file proxy then records the hashes of what that
// proxy serves, whatever version it is.
func stripSums(repo string) error {
	return rewriteFaucetSums(repo, func(_, _ string) (func(string) string, error) {
		return func(string) string { return "" }, nil
	})
}

// restoreSums puts back, in each listed module's go.sum in repo, the lines
// of faucet's modules that the same go.sum in orig has: a line for a
// faucet module version orig's go.sum does not record is dropped. Every
// other line, and the order, stay as they are in repo.
func restoreSums(repo, orig string) error {
	return rewriteFaucetSums(repo, func(root, dir string) (func(string) string, error) {
		origLines, err := sumLines(filepath.Join(orig, filepath.FromSlash(dir), "go.sum"))
		if err != nil {
			return nil, err
		}
		had := map[string]string{}
		for _, l := range origLines {
			if f := strings.Fields(l); len(f) == 3 && isFaucet(root, f[0]) {
				had[f[0]+" "+f[1]] = l
			}
		}
		return func(moduleVersion string) string { return had[moduleVersion] }, nil
	})
}

// rewriteFaucetSums rewrites the go.sum of every listed module in repo
// that has one: each line of one of faucet's modules becomes what the
// function forDir(the root module's path, the module's directory) returns
// for its "module version" ("" drops it); every other line, and the order,
// stay.
func rewriteFaucetSums(repo string, forDir func(root, dir string) (func(moduleVersion string) string, error)) error {
	mods, err := loadModules(repo)
	if err != nil {
		return err
	}
	root := mods[0].Path
	for _, m := range mods {
		file := filepath.Join(repo, filepath.FromSlash(m.Dir), "go.sum")
		lines, err := sumLines(file)
		if err != nil {
			return err
		}
		if lines == nil {
			continue
		}
		replace, err := forDir(root, m.Dir)
		if err != nil {
			return err
		}
		var out strings.Builder
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 3 && isFaucet(root, f[0]) {
				l = replace(f[0] + " " + f[1])
			}
			out.WriteString(l)
		}
		if err := writeIfChanged(file, []byte(out.String())); err != nil {
			return err
		}
	}
	return nil
}

func writeIfChanged(file string, data []byte) error {
	old, err := os.ReadFile(file)
	if err == nil && bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(file, data, 0o666)
}

// zipModules adds the modules in dirs, as they are in commit rev of repo,
// to the file-based module proxy in proxyDir at version v: the .mod, .zip
// and .info files and the list, as proxy.golang.org would serve them once
// the tags are pushed. The zip is made as the go command makes it from a
// tag (golang.org/x/mod/zip.CreateFromVCS: git archive, without nested
// modules). It prints each module's go.sum lines.
func zipModules(repo, rev, v, proxyDir string, dirs []string) error {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	commit, err := git(repo, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return err
	}
	commit = strings.TrimSpace(commit)
	when, err := git(repo, "show", "-s", "--format=%cI", commit)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		dir = path.Clean(dir)
		subdir, gomodPath := "", "go.mod"
		if dir != "." {
			subdir, gomodPath = dir, dir+"/go.mod"
		}
		gomod, err := git(repo, "show", commit+":"+gomodPath)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(gomodPath, []byte(gomod), nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s at %s: no module statement", gomodPath, rev)
		}
		if len(f.Replace) > 0 || len(f.Exclude) > 0 {
			return fmt.Errorf("%s at %s has replace or exclude directives: go install %s@%s would refuse it", gomodPath, rev, f.Module.Mod.Path, v)
		}
		m := module.Version{Path: f.Module.Mod.Path, Version: v}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(proxyDir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o777); err != nil {
			return err
		}
		zipFile := filepath.Join(vdir, v+".zip")
		zf, err := os.Create(zipFile)
		if err != nil {
			return err
		}
		err = modzip.CreateFromVCS(zf, m, repo, commit, subdir)
		if cerr := zf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(vdir, v+".mod"), []byte(gomod), 0o666); err != nil {
			return err
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{v, t.UTC()})
		if err := os.WriteFile(filepath.Join(vdir, v+".info"), info, 0o666); err != nil {
			return err
		}
		if err := addToList(filepath.Join(vdir, "list"), v); err != nil {
			return err
		}
		zipHash, err := dirhash.HashZip(zipFile, dirhash.Hash1)
		if err != nil {
			return err
		}
		modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(gomod)), nil
		})
		if err != nil {
			return err
		}
		fmt.Printf("%s %s %s\n%s %s/go.mod %s\n", m.Path, v, zipHash, m.Path, v, modHash)
	}
	return nil
}

func addToList(file, v string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	vs := strings.Fields(string(data))
	if !slices.Contains(vs, v) {
		vs = append(vs, v)
	}
	semver.Sort(vs)
	return os.WriteFile(file, []byte(strings.Join(vs, "\n")+"\n"), 0o666)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
