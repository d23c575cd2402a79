// Post a pull-request comment, or update this workflow's own earlier one, so each review keeps
// exactly one comment per purpose instead of adding a new one on every push.
//
// "Its own" means both: written by the account the workflow's GITHUB_TOKEN posts as (the
// `github-actions[bot]` Bot user), and its first line is the same marker (`<!-- ... -->`) as the
// new body's. Anyone can write a comment that starts with the marker; matching on the marker alone
// would let a human's comment (or another bot's) be overwritten with the review, or the review be
// hidden inside a comment someone else can edit. Such comments are left alone and a new one is
// posted.
const BOT_LOGIN = 'github-actions[bot]';

const firstLine = (text) => text.split('\n', 1)[0].replace(/\r$/, '');

module.exports = async ({ github, context, path, author = BOT_LOGIN }) => {
  const fs = require('fs');
  const body = fs.readFileSync(path, 'utf8');
  const marker = firstLine(body);
  if (!/^<!-- [^<>]+ -->$/.test(marker)) {
    throw new Error(`${path}: the first line must be a marker comment like "<!-- purpose -->", got ${JSON.stringify(marker)}`);
  }
  const { owner, repo } = context.repo;
  const issue_number = context.payload.pull_request.number;
  const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
  const mine = comments.find(
    (c) => c.user && c.user.login === author && c.user.type === 'Bot' && typeof c.body === 'string' && firstLine(c.body) === marker,
  );
  if (mine) {
    await github.rest.issues.updateComment({ owner, repo, comment_id: mine.id, body });
  } else {
    await github.rest.issues.createComment({ owner, repo, issue_number, body });
  }
};
