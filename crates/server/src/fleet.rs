//! The devices as the admin API sees them ([`herald_admin::Fleet`]): who is connected,
//! and everything that goes when a gadget is forgotten.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use herald_port::Platform;
use herald_session::gadget::ota::PushError;
use herald_store::{OtaUpdate, StoreError};

use crate::gadget::{forget_staged, Command, GadgetHub};
use crate::mobile::MobileHub;

pub(crate) struct Fleet {
    pub gadget: Arc<GadgetHub>,
    pub mobile: Arc<MobileHub>,
    /// The data directory, where firmware is staged for gadgets.
    pub data_dir: PathBuf,
}

#[async_trait]
impl herald_admin::Fleet for Fleet {
    fn is_online(&self, platform: Platform, id: &str) -> bool {
        match platform {
            Platform::Gadget => self.gadget.devices.is_online(id),
            Platform::Mobile => self.mobile.devices.is_online(id),
        }
    }

    fn online_count(&self, platform: Platform) -> usize {
        match platform {
            Platform::Gadget => self.gadget.devices.online_count(),
            Platform::Mobile => self.mobile.devices.online_count(),
        }
    }

    fn is_token_user(&self, person: &str) -> bool {
        self.mobile.is_token_user(person)
    }

    async fn forget_gadget(&self, id: &str) -> Result<bool, StoreError> {
        let forgotten = self.gadget.forget(id).await?;
        self.gadget.tell(id, Command::Forget).await;
        // Its pairing went with it: a device enrolling again under this id pairs again.
        self.gadget.authorized.set(id, false);
        self.gadget.own.waiting.leave(id);
        forget_staged(&self.data_dir, id).await;
        Ok(forgotten)
    }

    async fn push_firmware(&self, id: &str, image: PathBuf) -> Result<OtaUpdate, PushError> {
        self.gadget.push_ota(id, image, &self.data_dir).await
    }
}
