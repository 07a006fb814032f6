//! Building blocks shared by pages: the layout (navigation, demo banner, user menu), status
//! badges, the error panel and live updates.

pub mod badges;
pub mod chart;
pub mod errors;
pub mod layout;
pub mod live;
pub mod table;
