DROP TABLE portal_links;
