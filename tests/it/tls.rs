//! TLS (docs/src/reference/https.md) with real certificates over loopback: `ca init` files and modes, the
//! `serve --tls` configuration answering HTTP/1.1 and HTTP/2 to clients that trust only the
//! generated CA, CONNECT interception (SNI, no SNI, IP literals), a small forward proxy built
//! from the `tls` helpers (reqwest and curl through `http://<token>@proxy`), and curl
//! (OpenSSL) accepting the leaves when it is installed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use understudy::tls::{self, Ca, LeafCache, TlsError};

// ---- helpers ---------------------------------------------------------------------------

/// A TLS server on 127.0.0.1:0 (hyper-util auto: HTTP/1.1 and HTTP/2) whose answer says what
/// it saw: `<http version> sni=<name> alpn=<protocol>`.
async fn tls_server(config: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(tcp).await {
                    serve_decrypted(stream, String::new()).await;
                }
            });
        }
    });
    addr
}

/// Serve one decrypted stream; `token` is echoed back (the forward-proxy tests).
async fn serve_decrypted<IO>(stream: tokio_rustls::server::TlsStream<IO>, token: String)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = stream.get_ref().1;
    let sni = conn.server_name().unwrap_or("").to_string();
    let alpn = conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let body = format!(
            "{:?} sni={sni} alpn={alpn} token={token} path={}",
            req.version(),
            req.uri().path()
        );
        async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
    });
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// A reqwest client that trusts `ca` and nothing else, ignoring any proxy of the environment.
fn client(ca: &Ca) -> reqwest::ClientBuilder {
    tls::init_crypto();
    let root = reqwest::Certificate::from_der(ca.cert_der()).unwrap();
    reqwest::Client::builder().no_proxy().tls_certs_only([root])
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(" / ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn curl_available() -> bool {
    let found = Command::new("curl").arg("--version").output().is_ok();
    if !found {
        // Under CI a missing tool is a failure, never a skip (`.ci/run` exports CI=true).
        assert!(!crate::support::in_ci(), "CI must install curl");
        println!("note: curl is not on PATH; the curl checks are skipped");
    }
    found
}

fn write_pem(dir: &Path, ca: &Ca) -> String {
    let path = dir.join("ca.pem");
    std::fs::write(&path, ca.cert_pem()).unwrap();
    path.to_string_lossy().into_owned()
}

// ---- ca init ---------------------------------------------------------------------------

#[test]
fn ca_init_writes_the_pair_with_a_private_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let paths = Ca::init(&dir, false).unwrap();
    assert_eq!(paths.cert, dir.join("understudy-ca.pem"));
    assert_eq!(paths.key, dir.join("understudy-ca-key.pem"));
    let key_mode = std::fs::metadata(&paths.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(key_mode, 0o600, "the key is created 0600");
    let cert = std::fs::read_to_string(&paths.cert).unwrap();
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
    let key = std::fs::read_to_string(&paths.key).unwrap();
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));

    let ca = Ca::load(&dir).unwrap();
    assert_eq!(ca.cert_pem(), cert);

    // Never overwritten without force; the error names the file.
    let err = Ca::init(&dir, false).unwrap_err();
    assert!(matches!(err, TlsError::Exists { .. }));
    assert!(err.to_string().contains("understudy-ca-key.pem"), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(&paths.cert).unwrap(), cert);

    // With force: a new CA, the key still 0600.
    Ca::init(&dir, true).unwrap();
    assert_ne!(std::fs::read_to_string(&paths.cert).unwrap(), cert);
    assert_ne!(std::fs::read_to_string(&paths.key).unwrap(), key);
    let key_mode = std::fs::metadata(&paths.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(key_mode, 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 2, "no temporary files left: {leftovers:?}");
    Ca::load(&dir).unwrap();
}

#[test]
fn ca_init_refuses_when_only_the_certificate_exists() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("understudy-ca.pem"), "x").unwrap();
    let err = Ca::init(tmp.path(), false).unwrap_err();
    assert!(err.to_string().contains("understudy-ca.pem"), "{err}");
    assert!(
        !tmp.path().join("understudy-ca-key.pem").exists(),
        "nothing written"
    );
}

#[test]
fn ca_load_explains_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Ca::load(&tmp.path().join("nowhere"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("understudy-ca.pem"), "{err}");
    assert!(err.contains("understudy ca init --dir"), "{err}");

    // A key from another CA.
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    Ca::init(&a, false).unwrap();
    Ca::init(&b, false).unwrap();
    std::fs::copy(
        b.join("understudy-ca-key.pem"),
        a.join("understudy-ca-key.pem"),
    )
    .unwrap();
    let err = Ca::load(&a).unwrap_err().to_string();
    assert!(err.contains("does not belong"), "{err}");
    assert!(err.contains("--force"), "{err}");

    // Not a certificate at all.
    std::fs::write(b.join("understudy-ca.pem"), "hello").unwrap();
    let err = Ca::load(&b).unwrap_err().to_string();
    assert!(
        err.contains("understudy-ca.pem") && err.contains("not a PEM certificate"),
        "{err}"
    );
}

#[test]
fn ca_init_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    let out = run(&["ca", "init", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("understudy-ca.pem") && stdout.contains("SSL_CERT_FILE"),
        "{stdout}"
    );
    let cert = std::fs::read(dir.join("understudy-ca.pem")).unwrap();

    let out = run(&["ca", "init", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(dir.join("understudy-ca.pem")).unwrap(), cert);

    let out = run(&["ca", "init", "--dir", dir.to_str().unwrap(), "--force"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_ne!(std::fs::read(dir.join("understudy-ca.pem")).unwrap(), cert);

    // The default directory is ./certs.
    let out = run(&["ca", "init"]);
    assert_eq!(out.status.code(), Some(2), "certs/ already holds a CA");
}

// ---- serve --tls -----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_answers_http1_and_http2_to_a_client_trusting_only_the_ca() {
    let ca = Ca::generate().unwrap();
    let listen: SocketAddr = "127.0.0.1:7777".parse().unwrap();
    let config = tls::server_config_for_hosts(&ca, &tls::listen_hosts(&listen)).unwrap();
    assert_eq!(
        config.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );
    let addr = tls_server(config).await;

    for (url, resolve) in [
        (format!("https://127.0.0.1:{}/v1", addr.port()), false),
        (format!("https://localhost:{}/v1", addr.port()), true),
    ] {
        let mut h1 = client(&ca).http1_only();
        let mut h2 = client(&ca);
        if resolve {
            h1 = h1.resolve("localhost", addr);
            h2 = h2.resolve("localhost", addr);
        }
        let r = h1.build().unwrap().get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.version(), Version::HTTP_11);
        assert!(r.text().await.unwrap().contains("alpn=http/1.1"));

        let r = h2.build().unwrap().get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.version(), Version::HTTP_2);
        assert!(r.text().await.unwrap().starts_with("HTTP/2.0"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_fails_the_handshake() {
    let ca = Ca::generate().unwrap();
    let other = Ca::generate().unwrap();
    let config = tls::server_config_for_hosts(&ca, &["127.0.0.1".to_string()]).unwrap();
    let addr = tls_server(config).await;
    let url = format!("https://127.0.0.1:{}/", addr.port());
    let err = client(&other)
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    let chain = error_chain(&err);
    assert!(chain.contains("UnknownIssuer"), "{chain}");
    // The right CA still works on the same listener.
    let ok = client(&ca).build().unwrap().get(&url).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_for_another_host_is_refused() {
    let ca = Ca::generate().unwrap();
    let config = tls::server_config_for_hosts(&ca, &["localhost".to_string()]).unwrap();
    let addr = tls_server(config).await;
    let err = client(&ca)
        .build()
        .unwrap()
        .get(format!("https://127.0.0.1:{}/", addr.port()))
        .send()
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("NotValidForName"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_accepts_the_tls_listener() {
    if !curl_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ca = Ca::generate().unwrap();
    let cafile = write_pem(tmp.path(), &ca);
    let hosts = tls::listen_hosts(&"127.0.0.1:0".parse().unwrap());
    let addr = tls_server(tls::server_config_for_hosts(&ca, &hosts).unwrap()).await;
    let port = addr.port().to_string();
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        for url in [
            format!("https://localhost:{port}/curl"),
            format!("https://127.0.0.1:{port}/curl"),
        ] {
            let out = tokio::process::Command::new("curl")
                .args(["-sS", "--noproxy", "*", "--cacert", &cafile, flag])
                .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
                .args(["-w", "\n%{http_code} %{http_version}", &url])
                .output()
                .await
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "curl {flag} {url}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.ends_with(&format!("\n200 {version}")), "{stdout}");
        }
    }
    // Without the CA, curl refuses.
    let out = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--noproxy",
            "*",
            "--cacert",
            &write_pem(tmp.path(), &Ca::generate().unwrap()),
        ])
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
}

// ---- CONNECT interception --------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intercept_config_presents_a_leaf_for_the_sni_name() {
    let ca = Arc::new(Ca::generate().unwrap());
    let cache = Arc::new(LeafCache::new(ca.clone()));
    let addr = tls_server(tls::intercept_config(&cache, "fallback.test:443")).await;
    let host = "acme.my.salesforce.com";
    let r = client(&ca)
        .resolve(host, addr)
        .tls_info(true)
        .build()
        .unwrap()
        .get(format!("https://{host}:{}/services/data", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.version(), Version::HTTP_2);
    let info = r.extensions().get::<reqwest::tls::TlsInfo>().unwrap();
    let leaf = rustls::pki_types::CertificateDer::from(info.peer_certificate().unwrap().to_vec());
    // Issued by the CA, for the SNI name (not the fallback), usable now for serverAuth.
    ca.verify_leaf(&leaf, host).unwrap();
    assert!(ca.verify_leaf(&leaf, "fallback.test").is_err());
    assert!(Ca::generate().unwrap().verify_leaf(&leaf, host).is_err());
    assert!(r.text().await.unwrap().contains(&format!("sni={host}")));
    assert_eq!(cache.len(), 1);
    // The cached leaf is the one presented, and a second tunnel reuses it.
    assert_eq!(cache.get(host).unwrap().cert[0], leaf);
    let again = client(&ca)
        .resolve(host, addr)
        .build()
        .unwrap()
        .get(format!("https://{host}:{}/", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(cache.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sni_the_connect_host_is_used() {
    let ca = Arc::new(Ca::generate().unwrap());
    let cache = Arc::new(LeafCache::new(ca.clone()));

    // An IP-literal target: clients send no SNI; the leaf carries an IP SAN.
    let addr = tls_server(tls::intercept_config(&cache, "127.0.0.1:443")).await;
    let r = client(&ca)
        .tls_info(true)
        .build()
        .unwrap()
        .get(format!("https://127.0.0.1:{}/", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let info = r.extensions().get::<reqwest::tls::TlsInfo>().unwrap();
    let leaf = rustls::pki_types::CertificateDer::from(info.peer_certificate().unwrap().to_vec());
    ca.verify_leaf(&leaf, "127.0.0.1").unwrap();
    assert!(r.text().await.unwrap().contains("sni= "));

    // A name, with SNI switched off by the client.
    let addr = tls_server(tls::intercept_config(&cache, "api.example.test")).await;
    let r = client(&ca)
        .tls_sni(false)
        .resolve("api.example.test", addr)
        .build()
        .unwrap()
        .get(format!("https://api.example.test:{}/", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(cache.len(), 2);

    // No SNI and an unusable fallback: the handshake is refused, nothing is cached.
    let addr = tls_server(tls::intercept_config(&cache, "not a host")).await;
    let err = client(&ca)
        .build()
        .unwrap()
        .get(format!("https://127.0.0.1:{}/", addr.port()))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert_eq!(cache.len(), 2);
}

#[tokio::test]
async fn leaf_keys_are_never_the_ca_key() {
    let ca = Ca::generate().unwrap();
    let ca_key = ca.public_key_der();
    let cache = LeafCache::new(Arc::new(ca));
    for host in ["a.example", "127.0.0.1", "[::1]"] {
        let leaf = cache.get(host).unwrap();
        leaf.keys_match().unwrap();
        assert_ne!(
            leaf.key.public_key().unwrap().as_ref(),
            ca_key.as_slice(),
            "{host}"
        );
    }
}

// ---- a forward proxy made of the helpers -----------------------------------------------

/// A minimal HTTPS forward proxy: CONNECT host:port → 200 → TLS with `intercept_config` →
/// the decrypted requests are answered locally (echoing SNI and the proxy token). What the
/// server's `--forward-proxy` does, minus routing.
async fn forward_proxy(cache: Arc<LeafCache>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let cache = cache.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let cache = cache.clone();
                    async move { Ok::<_, Infallible>(connect(cache, req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

fn connect(cache: Arc<LeafCache>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r
    };
    if req.method() != Method::CONNECT {
        let target = tls::absolute_form(req.uri());
        return reply(StatusCode::OK, format!("plain {target:?}"));
    }
    let authority = req.uri().authority().map(|a| a.as_str()).unwrap_or("");
    let (host, _port) = match tls::parse_connect_authority(authority) {
        Ok(hp) => hp,
        Err(e) => return reply(StatusCode::BAD_REQUEST, e),
    };
    let token = match tls::proxy_credentials_token(req.headers()) {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => return reply(StatusCode::PROXY_AUTHENTICATION_REQUIRED, e),
    };
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let acceptor = TlsAcceptor::from(tls::intercept_config(&cache, &host));
        if let Ok(stream) = acceptor.accept(TokioIo::new(upgraded)).await {
            serve_decrypted(stream, token).await;
        }
    });
    reply(StatusCode::OK, String::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_proxy_built_from_the_helpers_intercepts_connect() {
    let ca = Arc::new(Ca::generate().unwrap());
    let proxy = forward_proxy(Arc::new(LeafCache::new(ca.clone()))).await;
    let proxy_url = format!("http://tok123@127.0.0.1:{}", proxy.port());
    tls::init_crypto();
    let root = reqwest::Certificate::from_der(ca.cert_der()).unwrap();
    let c = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(&proxy_url).unwrap())
        .tls_certs_only([root])
        .build()
        .unwrap();
    // The name never resolves: the proxy terminates the tunnel itself.
    let r = c
        .get("https://acme.my.salesforce.com/services/data/v60.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().await.unwrap();
    assert!(body.contains("sni=acme.my.salesforce.com"), "{body}");
    assert!(body.contains("token=tok123"), "{body}");
    assert!(body.contains("path=/services/data/v60.0"), "{body}");

    // Plain HTTP through the same proxy: an absolute-form target.
    let r = c
        .get("http://api.example.test:8080/a?b=1")
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    assert!(
        body.contains(r#"("http", "api.example.test", 8080, "/a?b=1")"#),
        "{body}"
    );

    if !curl_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cafile = write_pem(tmp.path(), &ca);
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--cacert", &cafile, "--proxy", &proxy_url])
        .arg("https://acme.my.salesforce.com/services/data")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("sni=acme.my.salesforce.com") && stdout.contains("token=tok123"),
        "{stdout}"
    );
}
