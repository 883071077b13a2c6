//! TLS material for tests: a throwaway CA, a server certificate and a
//! client certificate made with the `openssl` command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::private_dir;

/// A throwaway CA, a server certificate for 127.0.0.1 and a client
/// certificate (for mutual TLS), both signed by it, made with the `openssl`
/// command line in a fresh temporary directory (removed on drop).
pub struct TlsFiles {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TlsFiles {
    pub fn generate() -> TlsFiles {
        let dir = private_dir("tls").expect("create the certificate directory");
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .stdin(Stdio::null())
                .output()
                .expect("openssl runs (scripts/ensure-redis installs it)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
        let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=fairlock test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&ca);
        // One key and certificate signing request per party, each signed
        // by the CA with its own extensions.
        let sign = |name: &str, subject: &str, extensions: &str| {
            let mut csr = vec!["req", "-nodes"];
            csr.extend(ec);
            let (key, req, ext, crt) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.ext"),
                format!("{name}.crt"),
            );
            csr.extend(["-keyout", &key, "-out", &req, "-subj", subject]);
            openssl(&csr);
            std::fs::write(dir.join(&ext), extensions).unwrap();
            openssl(&[
                "x509",
                "-req",
                "-in",
                &req,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &ext,
                "-out",
                &crt,
            ]);
        };
        sign(
            "server",
            "/CN=127.0.0.1",
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\n\
             subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        );
        sign(
            "client",
            "/CN=fairlock test client",
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature\n\
             extendedKeyUsage=clientAuth\n",
        );
        TlsFiles {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.crt"),
            client_key: dir.join("client.key"),
            dir,
        }
    }

    /// The `redis-server` arguments of a server that listens for TLS only
    /// on the port it is started on (`{port}`, see
    /// [`RedisServer`](crate::RedisServer)), with the server certificate
    /// and key, trusting the CA; clients must present a certificate of
    /// the CA when `auth_clients` (`tls-auth-clients yes`: mutual TLS).
    pub fn server_args(&self, auth_clients: bool) -> Vec<String> {
        vec![
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            "{port}".to_owned(),
            "--tls-cert-file".to_owned(),
            path_arg(&self.server_cert),
            "--tls-key-file".to_owned(),
            path_arg(&self.server_key),
            "--tls-ca-cert-file".to_owned(),
            path_arg(&self.ca_cert),
            "--tls-auth-clients".to_owned(),
            if auth_clients { "yes" } else { "no" }.to_owned(),
        ]
    }

    /// As [`server_args`](Self::server_args) with mutual TLS, for a Redis
    /// Cluster node whose cluster bus and replication are TLS too, and
    /// which presents the client certificate (the server one is for
    /// `serverAuth` only) when it connects to the other nodes.
    pub fn cluster_node_args(&self) -> Vec<String> {
        let mut args = self.server_args(true);
        args.extend([
            "--tls-client-cert-file".to_owned(),
            path_arg(&self.client_cert),
            "--tls-client-key-file".to_owned(),
            path_arg(&self.client_key),
            "--tls-cluster".to_owned(),
            "yes".to_owned(),
            "--tls-replication".to_owned(),
            "yes".to_owned(),
        ]);
        args
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.ca_cert).unwrap()
    }

    /// The client certificate, PEM (signed by the CA, for `clientAuth`).
    pub fn client_cert_pem(&self) -> Vec<u8> {
        std::fs::read(&self.client_cert).unwrap()
    }

    /// The client certificate's private key, PEM.
    pub fn client_key_pem(&self) -> Vec<u8> {
        std::fs::read(&self.client_key).unwrap()
    }
}

/// A path as a command-line argument (temporary paths are UTF-8).
pub(crate) fn path_arg(path: &Path) -> String {
    path.to_str().expect("utf-8 temp path").to_owned()
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
