//! TLS for every listener: `wss://` when a certificate and key are configured.
//!
//! A configured but unusable certificate is a start-up error: falling back to plain
//! text would silently expose device keys and tokens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read TLS certificate {path}: {reason}")]
    Certificate { path: PathBuf, reason: String },
    #[error("cannot read TLS private key {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("TLS certificate and key do not work together: {0}")]
    Config(#[from] rustls::Error),
}

pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|iter| iter.collect())
        .map_err(|e| TlsError::Certificate {
            path: cert.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certificate {
            path: cert.to_owned(),
            reason: "no certificate in the file".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_owned(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
