// Command nodetest is the program of celkeeper's test image for the node tests: a static binary in an
// otherwise empty image, built locally (no registry).
//
//	nodetest serve [-port 8080]        HTTP: /healthz answers "ok", every other path "<hostname> <path>"
//	nodetest get [-timeout 30s] [-ca FILE] [-bearer FILE] URL
//	                                   GET URL until it answers 200 (or the timeout): prints the body, exit 0;
//	                                   -ca: trust this CA for https; -bearer: send this file as a bearer token
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodetest serve [-port N] | nodetest get [-timeout D] URL")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "get":
		err = get(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodetest:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	port := fs.Int("port", 8080, "TCP port")
	_ = fs.Parse(args)
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %s\n", host, r.URL.Path)
	})
	srv := &http.Server{Addr: fmt.Sprintf(":%d", *port), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Printf("serving on :%d as %s\n", *port, host)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	caFile := fs.String("ca", "", "PEM file of the CA to trust for https")
	bearerFile := fs.String("bearer", "", "file holding a bearer token to send")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("get: one URL expected")
	}
	url := fs.Arg(0)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificate in %s", *caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	token := ""
	if *bearerFile != "" {
		data, err := os.ReadFile(*bearerFile)
		if err != nil {
			return err
		}
		token = string(data)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: transport}
	deadline := time.Now().Add(*timeout)
	for {
		body, err := fetch(client, url, token)
		if err == nil {
			fmt.Print(body)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		fmt.Fprintf(os.Stderr, "GET %s: %v (retrying)\n", url, err)
		time.Sleep(500 * time.Millisecond)
	}
}

func fetch(client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return string(body), nil
}
