//! Building blocks shared by pages: the layout (navigation, demo banner, user menu), status
//! badges and the error panel.

pub mod badges;
pub mod errors;
pub mod layout;
pub mod table;
