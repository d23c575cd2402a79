// Post a pull-request comment, or update the one that starts with the same marker line, so each
// review keeps exactly one comment per purpose instead of adding a new one on every push.
module.exports = async ({ github, context, path }) => {
  const fs = require('fs');
  const body = fs.readFileSync(path, 'utf8');
  const marker = body.split('\n')[0];
  const { owner, repo } = context.repo;
  const issue_number = context.payload.pull_request.number;
  const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
  const mine = comments.find((c) => c.body && c.body.startsWith(marker));
  if (mine) {
    await github.rest.issues.updateComment({ owner, repo, comment_id: mine.id, body });
  } else {
    await github.rest.issues.createComment({ owner, repo, issue_number, body });
  }
};
