//! Building blocks shared by pages: the layout (navigation, demo banner, user menu), status
//! badges, the error panel, live updates and the pager of paged lists.

pub mod badges;
pub mod chart;
pub mod errors;
pub mod layout;
pub mod live;
pub mod pager;
pub mod table;
